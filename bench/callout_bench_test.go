package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

const (
	connectsPerRound = 25 // of each kind, per measured round
	benchIdP         = "https://idp.bench"
)

// benchIdPVerifier accepts "idtok" as (benchIdP, "alice-sub").
type benchIdPVerifier struct{}

func (benchIdPVerifier) VerifyIDToken(_ context.Context, raw string) (string, string, error) {
	if raw != "idtok" {
		return "", "", errors.New("unknown id token")
	}
	return benchIdP, "alice-sub", nil
}

// calloutMesh is an operator-mode broker with one user-auth space whose auth service
// (authsvc.Lane: ledger, bearer issuer, callout responder) is serving, and the two ways
// into its data account: the sentinel creds plus alice's bearer through the callout, and
// a static agent JWT for alice that needs no callout.
type calloutMesh struct {
	url            string
	sentinel       trust.Creds
	bearer, inbox  string // inbox: the connection name, its reply inbox _INBOX_<name>
	static         trust.Creds
	staticInboxPre string
}

func newCalloutMesh(b *testing.B) *calloutMesh {
	b.Helper()
	chain, err := trust.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ua, err := chain.UserAuth(space)
	if err != nil {
		b.Fatal(err)
	}
	jwts, err := chain.AccountJWTs()
	if err != nil {
		b.Fatal(err)
	}
	url := brokertest.StartOperator(b, chain.OperatorJWT(), chain.SystemAccount(), jwts).ClientURL()

	data := ua.DataAccount()
	prov, err := data.Mint(trust.UserSpec{Name: "bench provisioner", Profile: trust.ProfileProvisioner})
	if err != nil {
		b.Fatal(err)
	}
	pc := dialCreds(b, url, prov)
	js, err := jetstream.New(pc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := provision.Space(b.Context(), js, space, provision.Options{}); err != nil {
		b.Fatal(err)
	}
	kv, err := js.KeyValue(b.Context(), provision.BucketAuth(space))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ledger.Grant(b.Context(), kv, ledger.Row{
		Actor: "alice", Subjects: []string{"alice-sub"},
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"},
	}); err != nil {
		b.Fatal(err)
	}

	lane := &authsvc.Lane{Space: space, Server: url, Chain: chain, IdP: benchIdPVerifier{}, IdPIssuer: benchIdP}
	ctx, cancel := context.WithCancel(b.Context())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- lane.Run(ctx, func() { close(ready) }) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("auth service: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		b.Fatalf("auth service: %v", err)
	case <-time.After(time.Minute):
		b.Fatal("auth service not ready")
	}

	xr := exchangeToken(b, authsvc.StateDir(chain.Dir(), space))
	sentinel, err := trust.ReadCreds(ua.SentinelCreds())
	if err != nil {
		b.Fatal(err)
	}
	uid, err := chain.Identity(space, xr.Actor)
	if err != nil {
		b.Fatal(err)
	}
	me := protocol.Principal{Owner: xr.Owner, Actor: xr.Actor}
	staticCreds, err := data.Mint(trust.UserSpec{
		Name: xr.Owner + "." + xr.Actor, Profile: trust.ProfileAgent, Principal: me, LifecycleUID: uid,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"},
	})
	if err != nil {
		b.Fatal(err)
	}
	static, err := trust.ReadCreds(staticCreds)
	if err != nil {
		b.Fatal(err)
	}
	staticInbox, err := trust.InboxPrefix(staticCreds)
	if err != nil {
		b.Fatal(err)
	}
	return &calloutMesh{
		url: url, sentinel: sentinel, bearer: xr.Token, inbox: userauth.NewInboxName(),
		static: static, staticInboxPre: staticInbox,
	}
}

// exchangeToken trades the fake IdP's ID token for alice's bearer at the lane's exchange.
func exchangeToken(b *testing.B, dir string) exchangewire.Response {
	b.Helper()
	st, err := authsvc.ReadStatus(dir)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(exchangewire.Request{IDToken: "idtok", Actor: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, st.URL+"/exchange", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Cap)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var xr exchangewire.Response
	if err := json.NewDecoder(resp.Body).Decode(&xr); err != nil || resp.StatusCode != http.StatusOK || xr.Token == "" {
		b.Fatalf("exchange: status %d, %v, %+v", resp.StatusCode, err, xr)
	}
	return xr
}

// dialCreds connects with a creds file until the benchmark ends.
func dialCreds(b *testing.B, url string, creds []byte) *nats.Conn {
	b.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(c.JWT, c.Seed))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// connects opens and closes n connections made with opts, one after another; nats.Connect
// returns once the server answered the CONNECT's PING, so each one was admitted.
func connects(b *testing.B, url string, n int, opts ...nats.Option) {
	b.Helper()
	if err := tryConnects(url, n, opts...); err != nil {
		b.Fatal(err)
	}
}

// tryConnects is connects returning the first refusal, for use off the benchmark's
// goroutine.
func tryConnects(url string, n int, opts ...nats.Option) error {
	opts = append(opts, nats.NoReconnect(), nats.Timeout(10*time.Second))
	for range n {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		nc.Close()
	}
	return nil
}

// BenchmarkConnect compares connects through the auth callout (sentinel creds plus a
// bearer, answered by the space's auth service with its shared-key cache warm) against
// static-JWT connects to the same data account, which need no callout: the floor. Rates
// are over all rounds; ratio is callout-connects/s over static-connects/s.
func BenchmarkConnect(b *testing.B) {
	m := newCalloutMesh(b)
	viaCallout := []nats.Option{nats.UserJWTAndSeed(m.sentinel.JWT, m.sentinel.Seed), nats.Token(m.bearer), nats.Name(m.inbox), nats.CustomInboxPrefix(userauth.InboxPrefix(m.inbox))}
	viaStatic := []nats.Option{nats.UserJWTAndSeed(m.static.JWT, m.static.Seed), nats.CustomInboxPrefix(m.staticInboxPre)}
	connects(b, m.url, 1, viaCallout...) // warms the callout's shared-key cache
	var static, callout time.Duration    // summed over rounds: one round is too short to trust
	for b.Loop() {
		static += timed(func() { connects(b, m.url, connectsPerRound, viaStatic...) })
		callout += timed(func() { connects(b, m.url, connectsPerRound, viaCallout...) })
	}
	n := float64(b.N * connectsPerRound)
	perSec := func(d time.Duration) float64 { return n / d.Seconds() }
	b.ReportMetric(perSec(static), "static-connects/s")
	b.ReportMetric(perSec(callout), "callout-connects/s")
	b.ReportMetric(static.Seconds()/callout.Seconds(), "ratio")
}

// concurrentClients is how many clients connect at once in BenchmarkConnectConcurrent.
const concurrentClients = 50

// BenchmarkConnectConcurrent is BenchmarkConnect with concurrentClients clients connecting
// at once, each connectsPerRound/5 times a round, all through the space's one auth lane
// (one callout responder): the lane's throughput. ratio is callout-connects/s over
// static-connects/s, static measured the same way in the same round.
func BenchmarkConnectConcurrent(b *testing.B) {
	m := newCalloutMesh(b)
	viaCallout := []nats.Option{nats.UserJWTAndSeed(m.sentinel.JWT, m.sentinel.Seed), nats.Token(m.bearer), nats.Name(m.inbox), nats.CustomInboxPrefix(userauth.InboxPrefix(m.inbox))}
	viaStatic := []nats.Option{nats.UserJWTAndSeed(m.static.JWT, m.static.Seed), nats.CustomInboxPrefix(m.staticInboxPre)}
	connects(b, m.url, 1, viaCallout...)
	each := connectsPerRound / 5
	all := func(opts []nats.Option) {
		var wg sync.WaitGroup
		for range concurrentClients {
			wg.Go(func() {
				if err := tryConnects(m.url, each, opts...); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	var static, callout time.Duration
	for b.Loop() {
		static += timed(func() { all(viaStatic) })
		callout += timed(func() { all(viaCallout) })
	}
	n := float64(b.N * concurrentClients * each)
	perSec := func(d time.Duration) float64 { return n / d.Seconds() }
	b.ReportMetric(perSec(static), "static-connects/s")
	b.ReportMetric(perSec(callout), "callout-connects/s")
	b.ReportMetric(static.Seconds()/callout.Seconds(), "ratio")
}

// timed returns how long f took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
