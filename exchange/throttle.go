package exchange

import (
	"container/list"
	"sync"
	"time"
)

// throttle counts refusals per peer in a rolling window: a peer is throttled while it has
// limit refusals younger than window. Throttled refusals are not recorded, so a throttled
// peer's Retry-After is exact. It tracks at most max peers, evicting the least recently
// refused one, so its memory is bounded by max × limit timestamps.
type throttle struct {
	limit  int
	window time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	peers map[string]*list.Element // of *bucket
	lru   *list.List               // front: most recently refused
}

// bucket is one peer's recent refusals, oldest first, at most limit of them.
type bucket struct {
	peer  string
	times []time.Time
}

func newThrottle(limit int, window time.Duration, max int, now func() time.Time) *throttle {
	return &throttle{limit: limit, window: window, max: max, now: now,
		peers: make(map[string]*list.Element), lru: list.New()}
}

// refused records a refusal of peer. It reports whether the peer is past the limit in the
// rolling window, and how long until its oldest counted refusal leaves the window.
func (t *throttle) refused(peer string) (retryAfter time.Duration, throttled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e, ok := t.peers[peer]
	if ok {
		t.lru.MoveToFront(e)
	} else {
		for t.lru.Len() >= t.max {
			old := t.lru.Back()
			delete(t.peers, old.Value.(*bucket).peer)
			t.lru.Remove(old)
		}
		e = t.lru.PushFront(&bucket{peer: peer})
		t.peers[peer] = e
	}
	b := e.Value.(*bucket)
	keep := 0
	for keep < len(b.times) && now.Sub(b.times[keep]) >= t.window {
		keep++
	}
	b.times = b.times[keep:]
	if len(b.times) < t.limit {
		b.times = append(b.times, now)
		return 0, false
	}
	return b.times[0].Add(t.window).Sub(now), true
}

// size is the number of peers tracked.
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.peers)
}
