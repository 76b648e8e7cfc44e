package exchange

import (
	"sync"
	"time"
)

// throttle counts refusals per peer in fixed windows. It tracks at most max peers: a new
// peer first drops peers whose window ended, then, if still full, the peer with the oldest
// window.
type throttle struct {
	limit  int
	window time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	peers map[string]*bucket
}

// bucket is one peer's current window.
type bucket struct {
	start time.Time
	n     int
}

func newThrottle(limit int, window time.Duration, max int, now func() time.Time) *throttle {
	return &throttle{limit: limit, window: window, max: max, now: now, peers: make(map[string]*bucket)}
}

// refused records a refusal of peer. It reports whether the peer is past the limit in its
// current window, and how long until that window ends.
func (t *throttle) refused(peer string) (retryAfter time.Duration, throttled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b, ok := t.peers[peer]
	if ok && now.Sub(b.start) >= t.window {
		b.start, b.n = now, 0
	}
	if !ok {
		t.makeRoom(now)
		b = &bucket{start: now}
		t.peers[peer] = b
	}
	b.n++
	if b.n <= t.limit {
		return 0, false
	}
	return b.start.Add(t.window).Sub(now), true
}

// makeRoom drops ended windows, then the oldest one, until a new peer fits.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.peers) < t.max {
		return
	}
	for p, b := range t.peers {
		if now.Sub(b.start) >= t.window {
			delete(t.peers, p)
		}
	}
	for len(t.peers) >= t.max {
		var oldest string
		var first time.Time
		for p, b := range t.peers {
			if oldest == "" || b.start.Before(first) {
				oldest, first = p, b.start
			}
		}
		delete(t.peers, oldest)
	}
}

// size is the number of peers tracked.
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.peers)
}
