package callout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/cotal-ai/cotal/internal/meshtest"
)

// startResponder runs r on a fresh callout-user connection to b until the test ends and
// returns the connection and a func that stops r and returns Run's result.
func startResponder(t *testing.T, b *calloutBroker, r *Responder) (*nats.Conn, func() error) {
	t.Helper()
	nc, err := b.connect(t, b.calloutJWT, b.calloutSeed, nats.Name("cotal:auth-service:test:callout"))
	if err != nil {
		t.Fatalf("callout connect: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	done := runReady(t, ctx, r, nc)
	return nc, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(deadline):
			t.Fatal("responder did not stop")
			return nil
		}
	}
}

func newBrokerResponder(t *testing.T, b *calloutBroker, service bool) *Responder {
	t.Helper()
	k := b.keys
	r, err := New(Config{
		Authorizer: testAuthorizer(), XKey: k.xkey,
		CalloutAccount: b.authPub, CalloutSigner: k.calloutSK,
		DataAccount: b.dataPub, DataSigner: k.dataSK,
		Logger:           slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		ServiceEndpoints: service, Space: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// srv sends a $SRV request on nc and decodes the one answer into v.
func srv(t *testing.T, nc *nats.Conn, subject string, v any) {
	t.Helper()
	m, err := nc.Request(subject, nil, deadline)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("%s: %v in %s", subject, err, m.Data)
	}
}

// waitStats asks $SRV.STATS on nc until the callout endpoint has taken n requests (micro
// counts a request once its handler returned) and returns its stats.
func waitStats(t *testing.T, nc *nats.Conn, n int) *micro.EndpointStats {
	t.Helper()
	var ep *micro.EndpointStats
	meshtest.Until(t, fmt.Sprintf("stats counting %d requests", n), deadline, func() bool {
		var stats micro.Stats
		srv(t, nc, "$SRV.STATS."+ServiceName, &stats)
		if len(stats.Endpoints) != 1 || stats.Endpoints[0].Name != EndpointName {
			t.Fatalf("stats endpoints: %+v", stats.Endpoints)
		}
		ep = stats.Endpoints[0]
		return ep.NumRequests == n
	})
	return ep
}

// endpointStats decodes the endpoint's data.
func endpointStats(t *testing.T, ep *micro.EndpointStats) Stats {
	t.Helper()
	var s Stats
	if err := json.Unmarshal(ep.Data, &s); err != nil {
		t.Fatalf("stats data %s: %v", ep.Data, err)
	}
	return s
}

// TestServiceEndpoints: with ServiceEndpoints the responder is the micro service
// ServiceName on the callout account; a good bearer still connects, a bad one is refused
// with the signed error, and $SRV.STATS counts both: num_requests 2, num_errors 0, data
// {granted 1, refused 1}. Once Run returns, the service is gone.
func TestServiceEndpoints(t *testing.T) {
	b := startCalloutBroker(t)
	nc, stop := startResponder(t, b, newBrokerResponder(t, b, true))

	var ping micro.Ping
	srv(t, nc, "$SRV.PING."+ServiceName, &ping)
	if ping.Name != ServiceName || ping.Version != ServiceVersion || ping.Metadata["space"] != "test" ||
		ping.Metadata["callout_account"] != b.authPub || ping.Metadata["data_account"] != b.dataPub {
		t.Fatalf("ping: %+v", ping)
	}
	var info micro.Info
	srv(t, nc, "$SRV.INFO."+ServiceName+"."+ping.ID, &info)
	if len(info.Endpoints) != 1 || info.Endpoints[0].Name != EndpointName ||
		info.Endpoints[0].Subject != Subject || info.Endpoints[0].QueueGroup != QueueGroup {
		t.Fatalf("info endpoints: %+v", info.Endpoints)
	}

	good, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good"))
	if err != nil {
		t.Fatalf("good bearer refused: %v", err)
	}
	good.Close()
	if bad, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("bad")); err == nil {
		bad.Close()
		t.Fatal("bad bearer connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("bad bearer: %v", err)
	}

	ep := waitStats(t, nc, 2)
	if got := endpointStats(t, ep); got != (Stats{Granted: 1, Refused: 1}) || ep.NumErrors != 0 {
		t.Fatalf("stats %+v, data %+v, want one grant, one refusal, no errors", ep, got)
	}

	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("$SRV.PING."+ServiceName, nil, deadline); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("ping after stop: %v, want no responders", err)
	}
	if c, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good")); err == nil {
		c.Close()
		t.Fatal("connected with the service stopped")
	}
}

// TestNoServiceEndpoints: without the option the responder answers but registers no $SRV
// subscriptions.
func TestNoServiceEndpoints(t *testing.T) {
	b := startCalloutBroker(t)
	nc, stop := startResponder(t, b, newBrokerResponder(t, b, false))
	good, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good"))
	if err != nil {
		t.Fatalf("good bearer refused: %v", err)
	}
	good.Close()
	for _, subject := range []string{"$SRV.PING", "$SRV.PING." + ServiceName, "$SRV.STATS." + ServiceName} {
		if _, err := nc.Request(subject, nil, deadline); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("%s: %v, want no responders", subject, err)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestServiceRunStopsWhenConnectionCloses: the service form of Run also returns
// nats.ErrConnectionClosed once its connection closes.
func TestServiceRunStopsWhenConnectionCloses(t *testing.T) {
	b := startCalloutBroker(t)
	nc, err := b.connect(t, b.calloutJWT, b.calloutSeed)
	if err != nil {
		t.Fatal(err)
	}
	stopsWhenClosed(t, nc, runReady(t, t.Context(), newBrokerResponder(t, b, true), nc))
}

// TestServiceCountsDrops: a forged request gets no reply from the service, yet is counted.
// nats-server denies clients a publish on Subject, so the service runs on a plain server
// where a test client plays nats-server.
func TestServiceCountsDrops(t *testing.T) {
	s := startServer(t, &server.Options{})
	k := newKeys(t)
	r, err := New(Config{
		Authorizer: testAuthorizer(), XKey: k.xkey,
		CalloutAccount: pub(t, k.calloutAcc), CalloutSigner: k.calloutSK,
		DataAccount: pub(t, k.dataAcc), DataSigner: k.dataSK,
		ServiceEndpoints: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), nats.Timeout(deadline), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, r, nc)

	fake := newFakeServer(t, pub(t, k.calloutAcc))
	body, user := fake.request(t, "good", k.xpub)
	good := nats.NewMsg(Subject)
	good.Header.Set(XKeyHeader, fake.xpub)
	good.Data = body
	m, err := nc.RequestMsg(good, deadline)
	if err != nil {
		t.Fatalf("sealed request: %v", err)
	}
	if rc := fake.openResponse(t, m.Data, k.xpub); rc.Subject != user || rc.Jwt == "" || len(m.Header) != 0 {
		t.Fatalf("response %+v, headers %v", rc, m.Header)
	}

	// A forged request (its sealing key is the server's, its body is not sealed to us):
	// the service takes it and sends nothing back.
	inbox := nc.NewRespInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	forged := nats.NewMsg(Subject)
	forged.Reply = inbox
	forged.Header.Set(XKeyHeader, fake.xpub)
	forged.Data = []byte("xkv1 not sealed to the callout xkey")
	if err := nc.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	ep := waitStats(t, nc, 2)
	if got := endpointStats(t, ep); got != (Stats{Granted: 1, Dropped: 1}) || ep.NumErrors != 0 {
		t.Fatalf("stats %+v, data %+v, want one grant, one drop, no errors", ep, got)
	}
	// The service would have replied before its handler returned and micro counted the
	// request; the flush round trip brings any such reply in. There is none.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := replies.Pending(); err != nil || n != 0 {
		t.Fatalf("forged request got %d replies (%v)", n, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
