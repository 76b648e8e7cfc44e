package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// TestClusterReplicates: three embedded brokers form one cluster; a stream made with three
// replicas on one node is served by every node, keeps every acknowledged message when its
// leader's node stops, and the node comes back under its kept name.
func TestClusterReplicates(t *testing.T) {
	nodes := brokertest.StartCluster(t, 3, func(_ int, s *broker.Server) { s.Cluster.Secret = "s3cret" })
	names := map[string]bool{}
	for _, n := range nodes {
		if !strings.HasPrefix(n.Name(), "cotal-") || names[n.Name()] {
			t.Fatalf("node name %q: want a unique cotal-… name", n.Name())
		}
		names[n.Name()] = true
		if n.ClusterURL() == "" || !strings.HasPrefix(n.ClusterURL(), "nats://127.0.0.1:") {
			t.Fatalf("cluster url %q", n.ClusterURL())
		}
	}
	urls := nodes[0].ClientURL() + "," + nodes[1].ClientURL() + "," + nodes[2].ClientURL()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second) // hang guard
	defer cancel()
	// A new cluster may answer its first request 503 until every peer has registered.
	var st jetstream.Stream
	untilAcked(ctx, t, "create stream R3", func(ctx context.Context) (err error) {
		st, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		return err
	})
	for i := range 10 {
		if _, err := js.Publish(ctx, "r3.a", []byte{byte(i)}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v", info.Cluster)
	}
	var leader *broker.Server
	for _, n := range nodes {
		if n.Name() == info.Cluster.Leader {
			leader = n
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the nodes", info.Cluster.Leader)
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	var up []*broker.Server
	for _, n := range nodes {
		if n != leader {
			up = append(up, n)
		}
	}
	// The two nodes left elect a new leader; a publish retried until it is acknowledged.
	// Each try has its own short deadline: a request that reaches a node while no leader
	// serves the stream gets no answer at all, and must not spend the whole hang guard.
	// The message id makes a retry of a publish that was stored but not acknowledged a
	// duplicate the stream drops, so the count below stays exact.
	untilAcked(ctx, t, "publish after the leader stopped", func(try context.Context) error {
		_, err := js.Publish(try, "r3.a", []byte{10}, jetstream.WithMsgID("after-stop"))
		return err
	})
	untilAcked(ctx, t, "stream info after the leader stopped", func(try context.Context) error {
		info, err = st.Info(try)
		if err == nil && info.State.Msgs < 11 {
			return fmt.Errorf("%d messages", info.State.Msgs)
		}
		return err
	})
	if info.State.Msgs != 11 {
		t.Fatalf("messages %d, want 11 (none lost)", info.State.Msgs)
	}
	back := brokertest.Restart(t, leader, up...)
	if back.Name() != leader.Name() {
		t.Fatalf("restarted node is %q, was %q", back.Name(), leader.Name())
	}
	if err := back.WaitJetStream(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// untilAcked calls try, each time with a deadline of its own, until it succeeds or ctx
// (the hang guard) ends.
func untilAcked(ctx context.Context, t *testing.T, what string, try func(context.Context) error) {
	t.Helper()
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := try(attempt)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestClusterRefusesWrongSecret: a node with another route secret is refused by the
// cluster: its route never forms and the node it dialed says why.
func TestClusterRefusesWrongSecret(t *testing.T) {
	refused := make(chan struct{}, 1)
	nodes := brokertest.StartCluster(t, 3, func(i int, s *broker.Server) {
		s.Cluster.Secret = "right"
		if i == 0 {
			s.Logger = slog.New(signalHandler{slog.NewTextHandler(testLog{t}, nil), "authentication error", refused})
		}
	})
	stranger := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t),
		Cluster: &broker.Cluster{Name: "test", Port: -1, Routes: []string{nodes[0].ClusterURL()}, Secret: "wrong"}}
	if err := stranger.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	select {
	case <-refused:
	case <-time.After(20 * time.Second): // hang guard
		t.Fatal("the node with the wrong secret was not refused")
	}
	// Route connections the stranger opened before the refusal close with it: none of them
	// becomes a route. A node keeps the others as its routes all the while.
	meshtest.Until(t, "the stranger routing to no node", 20*time.Second, func() bool { return stranger.Routes() == 0 })
	for i, n := range nodes {
		if n.Routes() == 0 {
			t.Fatalf("node %d lost its routes", i)
		}
	}
}

func TestClusterBadConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster broker.Cluster
		want    string
		wantErr error
	}{
		{"no name", broker.Cluster{}, "", broker.ErrNoClusterName},
		{"dotted name", broker.Cluster{Name: "a.b"}, `cluster name "a.b"`, nil},
		{"open off loopback", broker.Cluster{Name: "c", Host: "0.0.0.0"}, "", broker.ErrOpenOffLoopback},
		{"bad route", broker.Cluster{Name: "c", Routes: []string{"http://x:1"}}, "not a nats://host:port URL", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &broker.Server{Dir: t.TempDir(), Port: -1, Cluster: &c.cluster}
			err := srv.Start(t.Context())
			if err == nil || (c.wantErr != nil && !errors.Is(err, c.wantErr)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("start: %v, want %v %q", err, c.wantErr, c.want)
			}
		})
	}
	if _, err := broker.ParseRoutes("nats://a:6222, nats://b"); err == nil || !strings.Contains(err.Error(), "needs a port") {
		t.Fatalf("ParseRoutes: %v", err)
	}
	if r, err := broker.ParseRoutes("nats://a:6222,,nats://b:6222"); err != nil || len(r) != 2 {
		t.Fatalf("ParseRoutes: %v %v", r, err)
	}
}

// signalHandler passes records on and signals once a message contains word.
type signalHandler struct {
	slog.Handler
	word string
	ch   chan struct{}
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(strings.ToLower(r.Message), h.word) {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
