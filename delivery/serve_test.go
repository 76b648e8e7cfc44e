package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/spacehost"
)

// served is a Serve running in the background.
type served struct {
	cancel context.CancelFunc
	ready  chan spacehost.Ready
	done   chan error
}

// startServe runs Serve(cfg) until the test ends.
func startServe(t *testing.T, cfg Config) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &served{cancel: cancel, ready: make(chan spacehost.Ready, 1), done: make(chan error, 1)}
	go func() { s.done <- Serve(ctx, cfg, func(r spacehost.Ready) { s.ready <- r }, nil) }()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

// readyOrFail waits for s's ready call.
func (s *served) readyOrFail(t *testing.T) spacehost.Ready {
	t.Helper()
	select {
	case r := <-s.ready:
		return r
	case err := <-s.done:
		t.Fatalf("Serve returned before it was ready: %v", err)
	case <-time.After(deadline):
		t.Fatal("Serve was never ready")
	}
	return spacehost.Ready{}
}

// ended waits for Serve to return.
func (s *served) ended(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(deadline):
		t.Fatal("Serve did not return")
		return nil
	}
}

// TestServeRefusesConfig: a configuration that makes no sense refuses before any I/O
// (the broker URL names nothing that listens, and no credential is asked for).
func TestServeRefusesConfig(t *testing.T) {
	asked := false
	creds := func(string) ([]byte, error) { asked = true; return nil, errors.New("asked") }
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no server", Config{Space: space, Creds: creds}, "no broker URL"},
		{"no space", Config{Server: "nats://127.0.0.1:1", Creds: creds}, "name one space, or a space manifest"},
		{"both", Config{Server: "nats://127.0.0.1:1", Space: space, Spaces: "m.json", Creds: creds}, "name one space, or a space manifest"},
		{"bad space", Config{Server: "nats://127.0.0.1:1", Space: "a.b", Creds: creds}, "invalid space name"},
		{"no creds", Config{Server: "nats://127.0.0.1:1", Space: space}, "no credential source"},
		{"host waits", Config{Server: "nats://127.0.0.1:1", Spaces: "m.json", WaitForLease: true, Creds: creds}, "do not wait"},
		{"negative window", Config{Server: "nats://127.0.0.1:1", Space: space, BrokerGone: -time.Second, Creds: creds}, "broker-gone window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Serve(t.Context(), c.cfg, nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "delivery: ") {
				t.Fatalf("Serve: %v, want a refusal naming %q", err, c.want)
			}
		})
	}
	if asked {
		t.Fatal("a refused configuration asked for a credential")
	}
}

// TestServeOneSpace: Serve runs the lane of one space: ready names it, a second Serve of
// the space is refused with ErrLeaseHeld, and a cancelled Serve returns nil.
func TestServeOneSpace(t *testing.T) {
	m := newMesh(t, 0)
	cfg := Config{Server: m.URL, Space: space, Logger: brokertest.Logger(t),
		Creds: func(s string) ([]byte, error) { return m.Mint(s, meshtest.DeliverySpec()), nil }}
	first := startServe(t, cfg)
	if r := first.readyOrFail(t); !slices.Equal(r.Serving, []string{space}) || len(r.Retrying) != 0 {
		t.Fatalf("ready %+v, want serving %s", r, space)
	}
	if err := Serve(t.Context(), cfg, nil, nil); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a second Serve of the space: %v, want ErrLeaseHeld", err)
	}
	first.cancel()
	if err := first.ended(t); err != nil {
		t.Fatalf("cancelled Serve: %v", err)
	}
}

// TestServeHost: Serve with a space manifest runs a host: the space whose credential
// comes serves (it holds the lease), the one whose credential fails is retried with the
// credential's error, and the manifest is acknowledged.
func TestServeHost(t *testing.T) {
	m := newMesh(t, 0)
	manifest := filepath.Join(t.TempDir(), "spaces.json")
	if err := os.WriteFile(manifest, []byte(`{"version": 1, "spaces": ["`+space+`", "ghost"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noGhost := errors.New("no credential for ghost")
	creds := func(s string) ([]byte, error) {
		if s == "ghost" {
			return nil, noGhost
		}
		return m.Mint(s, meshtest.DeliverySpec()), nil
	}
	h := startServe(t, Config{Server: m.URL, Spaces: manifest, Creds: creds, Logger: brokertest.Logger(t)})
	r := h.readyOrFail(t)
	if !slices.Equal(r.Serving, []string{space}) || !slices.Equal(r.RetryingNames(), []string{"ghost"}) || !errors.Is(r.Retrying[0].Err, noGhost) {
		t.Fatalf("ready %+v, want serving %s and retrying ghost", r, space)
	}
	if _, err := os.Stat(spacehost.AppliedPath(manifest)); err != nil {
		t.Fatalf("the manifest is not acknowledged: %v", err)
	}
	err := Serve(t.Context(), Config{Server: m.URL, Space: space, Creds: creds}, nil, nil)
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("a single-space Serve beside the host: %v, want ErrLeaseHeld", err)
	}
	h.cancel()
	if err := h.ended(t); err != nil {
		t.Fatalf("cancelled host: %v", err)
	}
}

// TestServeHostBrokerGone: a broker lost for the whole process stops a host with
// ErrBrokerGone instead of retrying its lanes.
func TestServeHostBrokerGone(t *testing.T) {
	m := newMesh(t, 0)
	manifest := filepath.Join(t.TempDir(), "spaces.json")
	if err := os.WriteFile(manifest, []byte(`{"version": 1, "spaces": ["`+space+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := m.Mint(space, meshtest.DeliverySpec())
	h := startServe(t, Config{Server: m.URL, Spaces: manifest, BrokerGone: 300 * time.Millisecond, Logger: brokertest.Logger(t),
		Creds: func(string) ([]byte, error) { return creds, nil }})
	h.readyOrFail(t)
	if err := m.Server.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.ended(t); !errors.Is(err, ErrBrokerGone) {
		t.Fatalf("host after the broker died: %v, want ErrBrokerGone", err)
	}
}
