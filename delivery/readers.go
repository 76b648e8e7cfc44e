package delivery

import (
	"sync"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// readers is what the daemon knows, in memory, of the members reading durable channels
// live: a Go member says so at its durable join and then keeps confirming its position
// (confirmPosition, at least every second while connected, with closing set at Close).
// A member heard from within ttl is a reader: the fan-out defers its copies of a round
// for up to the grace, and writes only those its confirmed position has not covered by
// then (see fanout.round). A member that is not a reader (offline, crashed past ttl, a
// reference SDK, a daemon just restarted) gets its copies at once. What this holds only
// saves copies: every decision that drops one is backed by a position written in the
// member's row first.
type readers struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	at   map[readerKey]reading
	wake chan struct{} // closed when anything changes, if someone waits
}

// readerKey is one membership: a member incarnation and the channel (or pattern) of its
// row.
type readerKey struct {
	m       member
	channel string
}

// reading is the state of one membership's reader.
type reading struct {
	gen   uint64    // the row's generation
	pos   uint64    // the row's confirmed position, as written
	until time.Time // a reader until then
}

func newReaders(ttl time.Duration, now func() time.Time) *readers {
	return &readers{ttl: ttl, now: now, at: map[readerKey]reading{}}
}

// heard records that m reads channel live (row generation gen, confirmed position pos
// already written in the row): a reader for ttl more.
func (r *readers) heard(m member, channel string, gen, pos uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := readerKey{m, channel}
	cur, ok := r.at[k]
	if ok && cur.gen == gen {
		pos = max(pos, cur.pos)
	}
	r.at[k] = reading{gen: gen, pos: pos, until: r.now().Add(r.ttl)}
	r.changed()
}

// known returns the position of m's membership of channel at generation gen as this
// daemon last wrote it, if it holds one.
func (r *readers) known(m member, channel string, gen uint64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.at[readerKey{m, channel}]
	if !ok || cur.gen != gen {
		return 0, false
	}
	return cur.pos, true
}

// gone forgets m's membership of channel (it closed, or left).
func (r *readers) gone(m member, channel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.at[readerKey{m, channel}]; ok {
		delete(r.at, readerKey{m, channel})
		r.changed()
	}
}

// changed wakes the waiters; r.mu is held.
func (r *readers) changed() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// changes returns a channel closed at the next change.
func (r *readers) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return r.wake
}

// reading reports whether m reads live the row ro holds for it on a channel matching
// ch (heard from within ttl, at the row's generation).
func (r *readers) reading(ro roster, m member, ch string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range ro.byMember[m.key()] {
		if !row.Active() || !protocol.ChannelMatches(row.Channel, ch) {
			continue
		}
		if cur, ok := r.at[readerKey{m, row.Channel}]; ok && cur.gen == row.Generation && now.Before(cur.until) {
			return true
		}
	}
	return false
}

// given reports whether m confirmed, in a row written since the roster snapshot ro was
// taken, that it was given the post at seq on ch.
func (r *readers) given(ro roster, m member, ch string, seq uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range ro.byMember[m.key()] {
		if !row.Active() || !protocol.ChannelMatches(row.Channel, ch) {
			continue
		}
		if cur, ok := r.at[readerKey{m, row.Channel}]; ok && cur.gen == row.Generation && cur.pos >= seq {
			return true
		}
	}
	return false
}
