package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// TestReleaseWithoutQuorumEnds: the delivery daemon on the last node of a three-node
// cluster whose two other nodes stopped cannot release its lease (no quorum writes it).
// It gives up (at once when no stream leader answers, else within releaseBound), says the
// lease expires by itself and when, and returns long before the lease expires, so `cotal
// down` on that node does not wait out the lease's TTL.
func TestReleaseWithoutQuorumEnds(t *testing.T) {
	const ttl = 2 * time.Minute // far longer than a prompt close takes
	chain := meshtest.Chain(t, space)
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	nodes := brokertest.StartCluster(t, 3, func(_ int, s *broker.Server) {
		s.OperatorJWT, s.SystemAccount, s.Accounts = chain.OperatorJWT(), chain.SystemAccount(), accounts
		s.Cluster.Secret = chain.RouteSecret()
	})
	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(spec trust.UserSpec) []byte {
		creds, err := acct.Mint(spec)
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	js, err := jetstream.New(meshtest.ConnectTo(t, nodes[0].ClientURL(), mint(meshtest.ProvisionerSpec("prov"))))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.ProvisionCluster(t, js, space, provision.Options{Replicas: 3, Peers: 3, LeaseTTL: ttl})

	logs := &syncBuffer{}
	last := nodes[2]
	lane := &Lane{Space: space, Server: last.ClientURL(),
		Logger: slog.New(slog.NewTextHandler(teeWriter{logs, t}, nil)),
		Creds:  mint(meshtest.DeliverySpec()), ReconnectWait: 50 * time.Millisecond, OpTimeout: 3 * time.Second}
	d := serve(t, lane)

	for _, n := range nodes[:2] {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	d.cancel()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(ttl / 2): // a hang guard: the old close waited for the lease to expire
		t.Fatalf("the lane did not close while its lease stood; log:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "lease not released; it expires by itself") || !strings.Contains(logs.String(), "expires=") {
		t.Errorf("the close does not say when the lease expires; log:\n%s", logs)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// teeWriter writes each log line to a buffer and to the test's log.
type teeWriter struct {
	buf *syncBuffer
	t   testing.TB
}

func (w teeWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	return w.buf.Write(p)
}

// TestUnwritable: what a release at close gives up on at once (the bucket cannot be
// written now) and what it retries (the broker refused this write).
func TestUnwritable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("release lease: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("release lease: %w", jetstream.ErrNoStreamResponse), true},
		{nats.ErrNoResponders, true},
		{nats.ErrTimeout, true},
		{fmt.Errorf("release lease: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{fmt.Errorf("release lease: %w", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence"}), false},
		{errors.New("message size exceeds maximum allowed"), false},
	} {
		if got := unwritable(c.err); got != c.want {
			t.Errorf("unwritable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
