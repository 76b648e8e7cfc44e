package client_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// presenceRecord is a valid presence record of local.<actor>, written at now.
func presenceRecord(t testing.TB, actor string, st protocol.Status, activity string, now time.Time) []byte {
	t.Helper()
	id := protocol.OwnerLocal + "." + actor
	b, err := json.Marshal(protocol.Presence{
		Card:   protocol.AgentCard{ID: id, Name: actor, Kind: protocol.CardAgent},
		Status: st, TS: now.UnixMilli(), LifecycleUID: "uuuuuuuuuuuuuuuuuuuuuuuuuu",
		Activity: activity, ActiveAt: now.UnixMilli(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// spamRig is an open mesh with a raw connection that writes presence records.
type spamRig struct {
	url    string
	nc     *nats.Conn
	kv     jetstream.KeyValue
	prefix string
}

func newSpamRig(t testing.TB, url string) *spamRig {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	return &spamRig{url: url, nc: nc, kv: kv, prefix: "$KV." + protocol.BucketPresence(space) + "."}
}

// put writes actor's record and waits for the bucket to store it.
func (r *spamRig) put(t testing.TB, actor string, st protocol.Status, activity string) {
	t.Helper()
	if _, err := r.kv.Put(context.Background(), protocol.OwnerLocal+"."+actor, presenceRecord(t, actor, st, activity, time.Now())); err != nil {
		t.Fatal(err)
	}
}

// records builds n records of actor's key; activity(i) is the i-th record's.
func records(t testing.TB, actor string, n int, activity func(i int) string) [][]byte {
	t.Helper()
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = presenceRecord(t, actor, protocol.StatusWorking, activity(i), time.Now())
	}
	return recs
}

// spam publishes recs to actor's key without waiting for each to be stored, the way a
// peer writing its own key in a loop does.
func (r *spamRig) spam(t testing.TB, actor string, recs [][]byte) {
	t.Helper()
	subject := r.prefix + protocol.OwnerLocal + "." + actor
	for _, rec := range recs {
		if err := r.nc.Publish(subject, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.nc.FlushTimeout(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// watcher connects an observer (it does not join) to url.
func watcher(t testing.TB, url string) *client.Endpoint {
	t.Helper()
	ep, err := client.Connect(context.Background(), url, client.Config{Space: space, Name: "watcher",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return ep
}

// until reads changes until seen(c) holds for one, and returns how many changes of id
// it read on the way (that one included).
func until(t *testing.T, name string, changes <-chan client.PeerChange, id string, seen func(client.PeerChange) bool) int {
	t.Helper()
	n := 0
	timeout := time.After(20 * time.Second)
	for {
		select {
		case c, ok := <-changes:
			if !ok {
				t.Fatalf("%s: the watch ended", name)
			}
			if c.Card.ID != id {
				continue
			}
			n++
			if seen(c) {
				return n
			}
		case <-timeout:
			t.Fatalf("%s: %s never reached the awaited state (%d changes of it seen)", name, id, n)
		}
	}
}

// A peer spamming its own key never pushes out a quiet peer's one change: every watch,
// one reading as it goes, one that reads only after the spam (its buffers full), and one
// on the KV-watch path, sees the quiet peer working and the spammer's last record.
func TestWatchPresenceSpamKeepsQuietPeer(t *testing.T) {
	url := mesh(t)
	rig := newSpamRig(t, url)
	rig.put(t, "quiet", protocol.StatusIdle, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reading, err := watcher(t, url).WatchPresence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	late, err := watcher(t, url).WatchPresence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var decodes atomic.Int64
	consumer, err := client.WatchPresenceCounting(ctx, watcher(t, url), true, &decodes)
	if err != nil {
		t.Fatal(err)
	}
	// The reading watch takes its changes while the spam runs.
	type result struct{ quiet, last bool }
	done := make(chan result, 1)
	go func() {
		var r result
		for c := range reading {
			switch {
			case c.Card.ID == "local.quiet" && c.Status == protocol.StatusWorking && c.Activity == "reviewing":
				r.quiet = true
			case c.Card.ID == "local.spammer" && c.Activity == "last":
				r.last = true
			}
			if r.quiet && r.last {
				break
			}
		}
		done <- r
	}()

	spam := records(t, "spammer", 5000, func(i int) string { return "step " + strconv.Itoa(i) })
	rig.spam(t, "spammer", spam)
	rig.put(t, "quiet", protocol.StatusWorking, "reviewing")
	rig.spam(t, "spammer", spam)
	rig.spam(t, "spammer", records(t, "spammer", 1, func(int) string { return "last" }))

	for name, ch := range map[string]<-chan client.PeerChange{"late": late, "consumer": consumer} {
		until(t, name, ch, "local.quiet", func(c client.PeerChange) bool {
			// The record, not its freshness: on a slow machine it may be read past the window.
			return c.Status == protocol.StatusWorking && c.Activity == "reviewing"
		})
		until(t, name, ch, "local.spammer", func(c client.PeerChange) bool { return c.Activity == "last" })
	}
	select {
	case r := <-done:
		if !r.quiet || !r.last {
			t.Fatalf("the reading watch saw quiet working %v, the spammer's last record %v", r.quiet, r.last)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reading watch never saw both the quiet peer working and the spammer's last record")
	}
}

// A spammer changing its activity on every write costs each watch a bounded number of
// changes and decodes, on both paths, and its last record still arrives.
func TestWatchPresenceSpamBounded(t *testing.T) {
	url := mesh(t)
	rig := newSpamRig(t, url)
	const writes = 20000
	for _, c := range []struct {
		name        string
		viaConsumer bool
	}{{"live", false}, {"consumer", true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var decodes atomic.Int64
			changes, err := client.WatchPresenceCounting(ctx, watcher(t, url), c.viaConsumer, &decodes)
			if err != nil {
				t.Fatal(err)
			}
			// The watch is live once it reports a record written after it started.
			marker := "start " + c.name
			rig.put(t, "marker", protocol.StatusIdle, marker)
			until(t, c.name, changes, "local.marker", func(p client.PeerChange) bool { return p.Activity == marker })
			spam := records(t, "spammer", writes, func(i int) string { return c.name + " " + strconv.Itoa(i) })
			spam = append(spam, records(t, "spammer", 1, func(int) string { return "last " + c.name })...)
			start := time.Now()
			base := decodes.Load()
			rig.spam(t, "spammer", spam)
			n := until(t, c.name, changes, "local.spammer", func(p client.PeerChange) bool { return p.Activity == "last "+c.name })
			elapsed := time.Since(start)
			// One change (and decode) at once, then at most one per interval; a change may
			// also come from the sweep (a lagging watch reads the spammer silent).
			bound := int64(3 + elapsed/client.PresenceEvery)
			spent := decodes.Load() - base
			t.Logf("%d writes in %v: %d changes, %d decodes (bound %d)", writes+1, elapsed, n, spent, bound)
			if int64(n) > bound || spent > bound {
				t.Fatalf("%d writes in %v cost %d changes and %d decodes, want at most %d each",
					writes+1, elapsed, n, spent, bound)
			}
		})
	}
}
