package client

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// refDedupe is the id window as a plain ring of strings: the model dedupe must match.
type refDedupe struct {
	ring []string
	next int
}

func (r *refDedupe) first(id string) bool {
	if id == "" {
		return true
	}
	for _, s := range r.ring {
		if s == id {
			return false
		}
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	return true
}

func (r *refDedupe) forget(id string) {
	for i, s := range r.ring {
		if s == id {
			r.ring[i] = "" // its slot is reused in turn, as dedupe's
		}
	}
}

// Short ids (kept as fixed-size keys) and long ones (kept as strings) share one window:
// the oldest is forgotten first whatever its kind, and forget reaches both.
func TestDedupeShortAndLongIDsShareTheWindow(t *testing.T) {
	long := strings.Repeat("x", shortID+1)
	short := "0190b5b8-9c5e-7c3a-8f00-123456789abc" // a UUID
	d := newDedupe(2)
	if !d.first(long) || !d.first(short) {
		t.Fatal("two new ids were not first")
	}
	if d.first(long) || d.first(short) {
		t.Fatal("an id in the window was first again")
	}
	if !d.first("third") { // evicts long
		t.Fatal("a new id was not first")
	}
	if !d.first(long) { // evicts short
		t.Fatal("an id pushed out of the window was still remembered")
	}
	if !d.first(short) {
		t.Fatal("an id pushed out of the window was still remembered")
	}
	d.forget(short)
	d.forget(long)
	if !d.first(short) || !d.first(long) {
		t.Fatal("a forgotten id was not first")
	}
	if !d.first(short[:20]) || !d.first(long[:shortID]) {
		t.Fatal("a prefix of a remembered id was taken for it")
	}
}

// FuzzDedupe runs a sequence of first and forget calls against the plain model. Each
// step is one byte: its low bit chooses forget, the rest picks an id, short or long.
func FuzzDedupe(f *testing.F) {
	f.Add([]byte{0, 2, 4, 2, 0, 6, 8, 10, 12, 1, 0, 3, 2})
	f.Add([]byte{200, 202, 200, 201, 200, 254, 255, 254})
	f.Fuzz(func(t *testing.T, steps []byte) {
		d, ref := newDedupe(4), &refDedupe{ring: make([]string, 4)}
		for i, s := range steps {
			id := stepID(s >> 1)
			if s&1 == 1 {
				d.forget(id)
				ref.forget(id)
				continue
			}
			if got, want := d.first(id), ref.first(id); got != want {
				t.Fatalf("step %d: first(%q) = %v, want %v", i, id, got, want)
			}
		}
	})
}

// stepID maps n to one of a few ids: empty, short, exactly shortID bytes, or longer.
func stepID(n byte) string {
	switch n % 4 {
	case 0:
		return strings.Repeat("a", int(n/4)%3) // "", "a", "aa"
	case 1:
		return "id-" + string('a'+rune(n%7))
	case 2:
		return strings.Repeat(string('a'+rune(n%5)), shortID)
	}
	return strings.Repeat(string('a'+rune(n%5)), shortID+1+int(n%3))
}

// The window against the plain model over long random runs, for window sizes whose index
// wraps and clusters: ids drawn from a pool three times the window, a few forgotten.
func TestDedupeMatchesRing(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 16, 61, 256} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		d, ref := newDedupe(n), &refDedupe{ring: make([]string, n)}
		for step := range 40 * n * 3 {
			id := stepID(byte(rng.IntN(256)))
			if rng.IntN(4) != 0 {
				id = fmt.Sprintf("%08x-id", rng.IntN(3*n))
			}
			if rng.IntN(8) == 0 {
				d.forget(id)
				ref.forget(id)
				continue
			}
			if got, want := d.first(id), ref.first(id); got != want {
				t.Fatalf("window %d, step %d: first(%q) = %v, want %v", n, step, id, got, want)
			}
		}
		if d.used > n || 2*d.used > len(d.tab) {
			t.Fatalf("window %d: index holds %d entries in %d places", n, d.used, len(d.tab))
		}
	}
}

// BenchmarkDedupe records fresh UUIDs in a full window of the endpoint's size.
func BenchmarkDedupe(b *testing.B) {
	d := newDedupe(8192)
	ids := make([]string, 3*8192)
	for i := range ids {
		ids[i] = NewID()
	}
	for i := range 8192 {
		d.first(ids[i])
	}
	i := 8192
	for b.Loop() {
		if !d.first(ids[i]) {
			b.Fatal("a fresh id was taken for a duplicate")
		}
		if i++; i == len(ids) {
			i = 0
		}
	}
}
