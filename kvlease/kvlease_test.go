package kvlease

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// row is a test lease row.
type row struct {
	Instance string `json:"instance"`
	Dead     bool   `json:"dead,omitempty"`
}

func (r row) String() string { return "run " + r.Instance }

var errHeld = errors.New("the test lease is held")

// bucket starts a broker and returns a fresh bucket on a new connection to it, and a
// function that opens the same bucket on another connection.
func bucket(t *testing.T) (jetstream.KeyValue, func() (jetstream.KeyValue, *nats.Conn)) {
	t.Helper()
	srv := brokertest.Start(t)
	open := func() (jetstream.KeyValue, *nats.Conn) {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "lease_test", History: 1})
		if err != nil {
			t.Fatal(err)
		}
		return kv, nc
	}
	kv, _ := open()
	return kv, open
}

// newLease is instance's lease on key "lease.0" of kv.
func newLease(kv jetstream.KeyValue, instance string, ttl time.Duration) *Lease[row] {
	me := row{Instance: instance}
	return &Lease[row]{
		KV: kv, Key: "lease.0", TTL: ttl, Held: errHeld,
		Encode: func() []byte { b, _ := json.Marshal(me); return b },
		Decode: func(b []byte) (row, error) { var r row; err := json.Unmarshal(b, &r); return r, err },
		Mine:   func(r row) bool { return r.Instance == instance },
		Gone:   func(r row) bool { return r.Dead },
	}
}

// TestClosedWatchDoesNotSpin: a run waiting for a held lease whose connection closes (the
// watch channel is closed for good) waits out the row's expiry without reading the closed
// channel in a loop, then reports the closed connection.
func TestClosedWatchDoesNotSpin(t *testing.T) {
	kv, open := bucket(t)
	holder := newLease(kv, "holder", time.Hour)
	if err := holder.Acquire(t.Context(), false, nil); err != nil {
		t.Fatal(err)
	}
	wkv, wnc := open()
	waiter := newLease(wkv, "waiter", time.Second) // its wait ends a second after the row's write
	done := make(chan error, 1)
	go func() { done <- waiter.Acquire(t.Context(), true, nil) }()
	meshtest.Until(t, "the waiter waits on an open watch", 30*time.Second, func() bool { return waiter.wakes.Load() > 0 })
	wnc.Close() // the connection is lost for good: the watch's channel closes
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not return after the row's expiry")
	}
	if !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("acquire on a closed connection: %v, want nats.ErrConnectionClosed", err)
	}
	// One wake to start, one for the channel's close; a spin wakes millions of times.
	if n := waiter.wakes.Load(); n > 4 {
		t.Errorf("the wait woke %d times on a closed watch: it spins", n)
	}
}

// TestAcquireRefusesWaitsAndTakesOver: a held row is refused naming its holder; a waiter
// gets it once the holder releases; a dead holder's row is taken over at once; a release
// never deletes a successor's row.
func TestAcquireRefusesWaitsAndTakesOver(t *testing.T) {
	kv, _ := bucket(t)
	a := newLease(kv, "a", time.Hour)
	if err := a.Acquire(t.Context(), false, nil); err != nil {
		t.Fatal(err)
	}
	b := newLease(kv, "b", time.Hour)
	err := b.Acquire(t.Context(), false, nil)
	if !errors.Is(err, errHeld) || !strings.Contains(err.Error(), "run a") {
		t.Fatalf("second acquire: %v, want errHeld naming run a", err)
	}

	waited := make(chan row, 1)
	done := make(chan error, 1)
	go func() { done <- b.Acquire(t.Context(), true, func(h row) { waited <- h }) }()
	if h := <-waited; h.Instance != "a" {
		t.Fatalf("waiting on %v, want run a", h)
	}
	meshtest.Until(t, "b waits on an open watch", 30*time.Second, func() bool { return b.wakes.Load() > 0 })
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter after release: %v", err)
	}
	if err := a.Release(t.Context()); err != nil || !b.Holds() {
		t.Fatalf("a second release: %v", err)
	}
	if reading, holder, err := a.Recheck(t.Context()); err != nil || reading != Taken || holder.Instance != "b" {
		t.Fatalf("a's recheck: %v %v %v, want Taken by b", reading, holder, err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if reading, _, err := b.Recheck(t.Context()); err != nil || reading != Ours {
		t.Fatalf("b's row after a's release: %v %v", reading, err)
	}

	// A holder known dead loses its row at once.
	if _, err := kv.Put(t.Context(), "lease.0", []byte(`{"instance":"ghost","dead":true}`)); err != nil {
		t.Fatal(err)
	}
	c := newLease(kv, "c", time.Hour)
	if err := c.Acquire(t.Context(), false, nil); err != nil {
		t.Fatalf("acquire over a dead holder: %v", err)
	}
	if err := b.Renew(t.Context()); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("b's renewal after c took over: %v, want ErrKeyExists", err)
	}
}

// TestReleaseReadsTheStreamLeader: with Conn set, a release reads the row from the
// stream leader and deletes it at that revision, also after renewals; a row another run
// took, or one already deleted, is left alone.
func TestReleaseReadsTheStreamLeader(t *testing.T) {
	kv, open := bucket(t)
	_, nc := open()
	a := newLease(kv, "a", time.Minute)
	a.Conn = nc
	if err := a.Acquire(t.Context(), false, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := kv.Get(t.Context(), "lease.0"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the row after the release: %v, want it deleted", err)
	}
	// A row deleted under this run (a delete marker is the key's last message) is gone.
	if err := a.Acquire(t.Context(), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(t.Context(), "lease.0"); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context()); err != nil || a.Holds() {
		t.Fatalf("release of a deleted row: %v (holds %v)", err, a.Holds())
	}

	// Another run's row survives this run's release.
	if err := a.Acquire(t.Context(), false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "lease.0", []byte(`{"instance":"b"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatalf("release of a taken row: %v", err)
	}
	e, err := kv.Get(t.Context(), "lease.0")
	if err != nil || !strings.Contains(string(e.Value()), `"b"`) {
		t.Fatalf("the other run's row after the release: %v %v", e, err)
	}
}
