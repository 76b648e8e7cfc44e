package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

func leaseKV(t *testing.T, m *mesh) jetstream.KeyValue {
	t.Helper()
	kv, err := m.js.KeyValue(t.Context(), protocol.BucketDelivery(space))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestSecondDaemonRefusesThenTakesOver: a second daemon for the space refuses and names
// the holder; after the first dies without releasing, the lease expires and a waiting
// daemon takes over and serves (the first one's unacked posts included).
func TestSecondDaemonRefusesThenTakesOver(t *testing.T) {
	m := newMesh(t, 2*time.Second)
	first := m.lane()
	first.Instance = "first-daemon"
	first.abandon = true // its stop is a crash: no release
	d1 := serve(t, first)

	err := m.lane().Run(t.Context(), func() { t.Error("a second daemon served") })
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second daemon: %v, want ErrLeaseHeld", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{"first-daemon", "local.cotal_delivery", "host " + host, fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}

	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d1.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, held, err := ReadLease(t.Context(), m.js, space); err != nil || !held {
		t.Fatalf("a crashed daemon's lease: held %v, %v", held, err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 5)

	next := m.lane()
	next.Instance = "next-daemon"
	next.WaitForLease = true
	d2 := serve(t, next)
	info, held, err := ReadLease(t.Context(), m.js, space)
	if err != nil || !held || info.Instance != "next-daemon" || !info.Ready {
		t.Fatalf("lease after takeover: %+v held %v, %v", info, held, err)
	}
	meshtest.Until(t, "the posts made while no daemon served", deadline, func() bool { return m.stored("bob") == 5 })

	// A clean stop releases at once.
	if err := d2.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, held, err := ReadLease(t.Context(), m.js, space); err != nil || held {
		t.Fatalf("lease after a clean stop: held %v, %v", held, err)
	}
	serve(t, m.lane()) // and the next one starts without waiting
}

// TestTakeoverIsNoticedAtOnce: a foreign row in lease.0 stops the daemon through its
// watch, long before its next renewal, and it leaves that row alone.
func TestTakeoverIsNoticedAtOnce(t *testing.T) {
	m := newMesh(t, 0)
	l := m.lane()
	l.RenewEvery = time.Hour
	d := serve(t, l)
	foreign, _ := json.Marshal(LeaseInfo{Holder: "local.other", Instance: "usurper", Host: "elsewhere", PID: 1, Since: time.Now().UnixMilli(), Ready: true})
	if _, err := leaseKV(t, m).Put(t.Context(), protocol.LeaseKey, foreign); err != nil {
		t.Fatal(err)
	}
	err := d.ended(t)
	if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "usurper") {
		t.Fatalf("after a takeover: %v, want ErrFenced naming the usurper", err)
	}
	info, held, err := ReadLease(t.Context(), m.js, space)
	if err != nil || !held || info.Instance != "usurper" {
		t.Fatalf("the successor's row was touched: %+v %v %v", info, held, err)
	}
}

// TestFailedRenewalRechecks: a renewal that fails (here: the row was rewritten behind the
// daemon's back, still naming it) makes it re-read the lease, find it its own, adopt the
// revision and keep serving; a deleted row is re-created.
func TestFailedRenewalRechecks(t *testing.T) {
	m := newMesh(t, 0)
	l := m.lane()
	l.Instance = "renewer"
	l.RenewEvery = 50 * time.Millisecond
	d := serve(t, l)
	kv := leaseKV(t, m)
	e, err := kv.Get(t.Context(), protocol.LeaseKey)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(t.Context(), protocol.LeaseKey, e.Value()) // same holder, new revision
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "a renewal after the recheck", deadline, func() bool {
		e, err := kv.Get(t.Context(), protocol.LeaseKey)
		return err == nil && e.Revision() > rev+1 && strings.Contains(string(e.Value()), `"renewer"`)
	})
	if err := kv.Delete(t.Context(), protocol.LeaseKey); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the deleted lease re-created", deadline, func() bool {
		info, held, err := ReadLease(t.Context(), m.js, space)
		return err == nil && held && info.Instance == "renewer"
	})
	select {
	case err := <-d.done:
		t.Fatalf("the daemon stopped: %v", err)
	default:
	}
	bob := m.endpoint(m.agent("bob", "general"))
	if p, err := bob.ProbeDelivery(t.Context()); err != nil || p.Responder != protocol.ResponderBound {
		t.Fatalf("probe: %+v %v", p, err)
	}
}

// TestBrokerGone: killing the broker makes the daemon exit by itself once the window
// passes; a blip shorter than the window does not, and it serves again after it.
func TestBrokerGone(t *testing.T) {
	t.Run("killed", func(t *testing.T) {
		m := newMesh(t, 0)
		l := m.lane()
		l.BrokerGone = 300 * time.Millisecond
		d := serve(t, l)
		if err := m.Server.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.ended(t); !errors.Is(err, ErrBrokerGone) {
			t.Fatalf("after the broker died: %v, want ErrBrokerGone", err)
		}
	})
	t.Run("blip", func(t *testing.T) {
		m := newMesh(t, 0)
		l := m.lane()
		l.BrokerGone = time.Minute
		d := serve(t, l)
		bobCreds := m.agent("bob", "general")
		bob := m.endpoint(bobCreds)
		if err := bob.JoinChannel(t.Context(), "general"); err != nil {
			t.Fatal(err)
		}
		if err := bob.Close(); err != nil {
			t.Fatal(err)
		}
		m.restart()
		alice := m.endpoint(m.agent("alice", "general"))
		meshtest.Until(t, "the daemon serving again", deadline, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			p, err := alice.ProbeDelivery(ctx)
			return err == nil && p.Responder == protocol.ResponderBound
		})
		if _, err := alice.Post(t.Context(), "general", client.Text("after the blip")); err != nil {
			t.Fatal(err)
		}
		meshtest.Until(t, "a copy after the blip", deadline, func() bool { return m.stored("bob") == 1 })
		select {
		case err := <-d.done:
			t.Fatalf("the daemon exited on a blip: %v", err)
		default:
		}
	})
}

// TestCloseConfirmsRelease: a lease release the broker refuses at close is retried, and
// the lane's close is confirmed (Run returns) only once the release goes through.
func TestCloseConfirmsRelease(t *testing.T) {
	m := newMesh(t, 30*time.Second)
	d := serve(t, m.lane())
	ctx := t.Context()
	s, err := m.js.Stream(ctx, "KV_"+protocol.BucketDelivery(space))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	orig := cfg.MaxMsgSize
	cfg.MaxMsgSize = 1 // the release's delete marker no longer fits
	if _, err := m.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d.cancel()
	select {
	case err := <-d.done:
		t.Fatalf("the lane closed with its lease unreleased: %v", err)
	case <-time.After(2*releaseRetry + releaseRetry/2):
	}
	if _, held, err := ReadLease(ctx, m.js, space); err != nil || !held {
		t.Fatalf("lease while the release is refused: held %v, %v", held, err)
	}
	cfg.MaxMsgSize = orig
	if _, err := m.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := d.ended(t); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, held, err := ReadLease(ctx, m.js, space); err != nil || held {
		t.Fatalf("lease after the close: held %v, %v", held, err)
	}
}
