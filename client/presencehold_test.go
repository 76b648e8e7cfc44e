package client

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
)

// The held records, on a clock of the test's own: a key's first record is ready at once,
// later ones wait out the interval and only the latest is taken, and another key is never
// held back by a busy one.
func TestHeldRecords(t *testing.T) {
	const every = 100 * time.Millisecond
	t0 := testclock.Epoch(t)
	h := newHeldRecords(every)
	woke := func() bool {
		select {
		case <-h.wake:
			return true
		default:
			return false
		}
	}
	keys := func(rs []kvRecord) (out []string) {
		for _, r := range rs {
			out = append(out, r.key+"="+string(r.value))
		}
		return out
	}

	h.put(kvRecord{key: "spam", value: []byte("1")}, t0)
	if !woke() {
		t.Fatal("a key's first record did not wake the watch")
	}
	ready, next := h.take(t0)
	if got := keys(ready); len(got) != 1 || got[0] != "spam=1" || !next.IsZero() {
		t.Fatalf("first take = %v, next %v; want [spam=1] and nothing held", got, next)
	}

	for i := 2; i <= 1000; i++ {
		h.put(kvRecord{key: "spam", value: []byte{byte('0' + i%10)}}, t0.Add(time.Millisecond))
	}
	if !woke() {
		t.Fatal("a key held anew did not wake the watch (it could not set its timer)")
	}
	if woke() {
		t.Fatal("more than one wake-up is waiting")
	}
	h.put(kvRecord{key: "quiet", value: []byte("q")}, t0.Add(2*time.Millisecond))
	if !woke() {
		t.Fatal("another key's first record did not wake the watch")
	}
	ready, next = h.take(t0.Add(2 * time.Millisecond))
	if got := keys(ready); len(got) != 1 || got[0] != "quiet=q" {
		t.Fatalf("take during the spammer's interval = %v, want only [quiet=q]", got)
	}
	if !next.Equal(t0.Add(every)) {
		t.Fatalf("next = %v, want the spammer's interval end %v", next, t0.Add(every))
	}
	ready, _ = h.take(t0.Add(every))
	if got := keys(ready); len(got) != 1 || got[0] != "spam=0" {
		t.Fatalf("take at the interval's end = %v, want the latest record only [spam=0]", got)
	}

	h.prune(t0.Add(10 * every))
	if len(h.next) != 0 || len(h.held) != 0 || len(h.order) != 0 {
		t.Fatalf("after prune: next %v, held %v, order %v; want all empty", h.next, h.held, h.order)
	}
}
