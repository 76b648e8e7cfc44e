package client

import (
	"sync"
	"time"
)

// heldRecords holds the latest raw presence record of each key until the watch applies
// it, and spaces the records applied for one key by at least every. put runs on the
// subscription's (or the KV watcher's) goroutine and never blocks on the watch, so a
// write is never dropped for want of room: a later one of the same key replaces it.
type heldRecords struct {
	every time.Duration
	// wake has room for one signal: a record is ready, or a key was held anew (the watch
	// then sets its timer to when that key comes due).
	wake chan struct{}

	mu    sync.Mutex
	held  map[string]kvRecord  // the latest record not yet applied, per key
	order []string             // the keys of held, in the order first held
	next  map[string]time.Time // when a key applied lately may be applied again
}

func newHeldRecords(every time.Duration) *heldRecords {
	return &heldRecords{
		every: every,
		wake:  make(chan struct{}, 1),
		held:  map[string]kvRecord{},
		next:  map[string]time.Time{},
	}
}

// put holds r, received at now, in place of any record of its key not yet applied.
func (h *heldRecords) put(r kvRecord, now time.Time) {
	h.mu.Lock()
	_, was := h.held[r.key]
	h.held[r.key] = r
	if !was {
		h.order = append(h.order, r.key)
	}
	ready := !now.Before(h.next[r.key]) // a key never applied has the zero time: ready
	h.mu.Unlock()
	if ready || !was {
		select {
		case h.wake <- struct{}{}:
		default: // a signal is already waiting
		}
	}
}

// take returns the held records whose key is due at now, in the order their keys were
// first held, and marks those keys applied at now. next is when the earliest key still
// held comes due, or zero when none is held.
func (h *heldRecords) take(now time.Time) (ready []kvRecord, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := h.order[:0]
	for _, k := range h.order {
		if due := h.next[k]; now.Before(due) {
			keep = append(keep, k)
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		ready = append(ready, h.held[k])
		delete(h.held, k)
		if h.every > 0 {
			h.next[k] = now.Add(h.every)
		}
	}
	clear(h.order[len(keep):]) // no stale key strings kept alive
	h.order = keep
	return ready, next
}

// prune forgets the keys whose interval is over at now, so a space whose peers come and
// go keeps no trace of the departed.
func (h *heldRecords) prune(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, due := range h.next {
		if !now.Before(due) {
			delete(h.next, k)
		}
	}
}
