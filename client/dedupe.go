package client

import (
	"hash/maphash"
	"strings"
	"sync"
)

// dedupe remembers the last n non-empty message ids.
//
// The window is a ring of n slots, oldest at next, with an index over it: an
// open-addressed table (linear probing, at most half full) whose entries name a slot and
// carry 32 bits of the id's hash. A lookup reads one or two entries of the table (8 bytes
// an entry, so it mostly stays in cache) and compares the id itself only at an entry
// whose hash bits match: a hash never decides alone.
//
// An id of at most shortID bytes (a UUID, as every sender of the spec makes) is kept in
// its slot as a fixed-size value, not a string: no copy of it is allocated and the ring
// holds no pointers for the garbage collector to scan. A longer id is kept as a string in
// a map by slot. forget empties the id's slot, so a slot reused drops only an id recorded
// there (an id forgotten and recorded again lives in its newer slot alone).
type dedupe struct {
	mu    sync.Mutex
	seed  maphash.Seed
	ring  []idKey        // the window; a slot's n is 0 when empty, longSlot for a long id
	hash  []uint32       // the hash bits of each slot's id
	long  map[int]string // the id of each slot that holds a long one
	tab   []uint64       // the index: 0 is empty, else hash bits << 32 | (slot + 1)
	used  int            // entries in tab
	next  int
	size  int    // the window's length; the ring grows to it as ids arrive
	added uint64 // ids recorded so far
}

// shortID is the longest id kept in its slot.
const shortID = 39

// longSlot is the n of a slot whose id, longer than shortID, is in dedupe.long.
const longSlot = 255

// idKey is a slot of the window: an id of 1 to shortID bytes, its length and its bytes.
type idKey struct {
	n uint8
	b [shortID]byte
}

func newDedupe(n int) *dedupe {
	// Nothing is reserved up front: an endpoint that receives little holds little.
	return &dedupe{seed: maphash.MakeSeed(), long: map[int]string{}, size: n}
}

// first records id and reports whether it was not seen before. An empty id is never a
// dedupe key, so it is always first.
func (d *dedupe) first(id string) bool {
	if id == "" {
		return true
	}
	h := uint32(maphash.String(d.seed, id))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.find(id, h) >= 0 {
		return false
	}
	if len(d.ring) < d.size {
		d.ring, d.hash = append(d.ring, idKey{}), append(d.hash, 0)
	} else {
		d.empty(d.next)
	}
	s := d.next
	if k := &d.ring[s]; len(id) <= shortID {
		k.n = uint8(len(id))
		copy(k.b[:], id)
	} else {
		k.n = longSlot
		d.long[s] = strings.Clone(id) // the id may share memory with a whole message body
	}
	d.hash[s] = h
	d.insert(uint64(h)<<32 | uint64(s+1))
	d.next = (d.next + 1) % d.size
	d.added++
	return true
}

// forget lets id be first again.
func (d *dedupe) forget(id string) {
	if id == "" {
		return
	}
	h := uint32(maphash.String(d.seed, id))
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := d.find(id, h); i >= 0 {
		d.empty(int(uint32(d.tab[i])) - 1)
	}
}

// holds reports whether slot s holds id.
func (d *dedupe) holds(s int, id string) bool {
	k := &d.ring[s]
	if len(id) <= shortID {
		return int(k.n) == len(id) && string(k.b[:k.n]) == id
	}
	return k.n == longSlot && d.long[s] == id
}

// find returns the position in the index of id's entry (h its hash bits), or -1.
func (d *dedupe) find(id string, h uint32) int {
	if len(d.tab) == 0 {
		return -1
	}
	mask := uint32(len(d.tab) - 1)
	for i := h & mask; ; i = (i + 1) & mask { // ends: the index is never full
		e := d.tab[i]
		if e == 0 {
			return -1
		}
		if uint32(e>>32) == h && d.holds(int(uint32(e))-1, id) {
			return int(i)
		}
	}
}

// empty drops the id of slot s, if any, from the window and the index.
func (d *dedupe) empty(s int) {
	k := &d.ring[s]
	if k.n == 0 {
		return
	}
	mask := uint32(len(d.tab) - 1)
	for i := d.hash[s] & mask; d.tab[i] != 0; i = (i + 1) & mask {
		if uint32(d.tab[i]) == uint32(s+1) {
			d.remove(i)
			break
		}
	}
	if k.n == longSlot {
		delete(d.long, s)
	}
	k.n = 0
}

// insert adds entry e to the index, growing it to stay at most half full.
func (d *dedupe) insert(e uint64) {
	if 2*(d.used+1) > len(d.tab) {
		old := d.tab
		d.tab, d.used = make([]uint64, max(16, 2*len(old))), 0
		for _, o := range old {
			if o != 0 {
				d.insert(o)
			}
		}
	}
	mask := uint32(len(d.tab) - 1)
	i := uint32(e>>32) & mask
	for d.tab[i] != 0 {
		i = (i + 1) & mask
	}
	d.tab[i] = e
	d.used++
}

// remove takes the entry at i out of the index, moving later entries of its probe run
// back so that every entry stays reachable from its home position.
func (d *dedupe) remove(i uint32) {
	mask := uint32(len(d.tab) - 1)
	for j := i; ; {
		d.tab[i] = 0
		for {
			j = (j + 1) & mask
			e := d.tab[j]
			if e == 0 {
				d.used--
				return
			}
			// e stays unless its home k lies cyclically outside (i, j]: then the hole at i
			// would cut it off from k.
			k := uint32(e>>32) & mask
			if (i <= j && (k <= i || k > j)) || (i > j && k <= i && k > j) {
				d.tab[i] = e
				i = j
				break
			}
		}
	}
}

// mark is how many ids were recorded so far; give it to holdsSince later.
func (d *dedupe) mark() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.added
}

// holdsSince reports whether every id recorded since mark is still remembered, so an
// id it does not hold was not recorded since then.
func (d *dedupe) holdsSince(mark uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.added-mark <= uint64(d.size)
}
