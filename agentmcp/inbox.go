package agentmcp

import (
	"slices"
	"strconv"
	"sync"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Window bounds: what one cotal_inbox call returns at most, and how much the server holds
// before it stops reading the endpoint (the rest stays on the broker, unacked).
const (
	DefaultWindowItems = 50
	DefaultWindowBytes = 64 << 10
	DefaultHold        = 1000
)

// inbox holds the messages the model has not been given yet. A held copy is not acked:
// it is acked only once a cotal_inbox result carrying it was written to the client, so a
// server that dies holding it leaves it on the broker for the next incarnation. A push
// only tells the client that messages wait (see wakeup); it gives the model nothing.
type inbox struct {
	mu    sync.Mutex
	items []*client.Incoming
	room  chan struct{} // signalled when items shrink below the hold limit
	hold  int
	drain int64 // unix ms of the last window taken; 0 never
	// sent are the windows a cotal_inbox result carries, by window id, from the moment
	// the result is built until it is written to the client (then acked) or the session
	// ends (then handed back).
	sent   map[string][]*client.Incoming
	nextID uint64
	closed bool // all was called: the session is over
	// told are the held messages a wake-up named; woken is set from a wake-up until the
	// next window is taken (the model answered it), and no other wake-up goes out meanwhile.
	told  map[*client.Incoming]bool
	woken bool
	// changed is closed and replaced whenever a message is held (see arrivals), so a
	// cotal_wait blocked on it wakes at once.
	changed chan struct{}
	// unacked are the copies a written result gave the model under the "read means
	// acked" mode, by message id: held on the broker until cotal_ack names them.
	unacked map[string]*client.Incoming
}

func newInbox(hold int) *inbox {
	return &inbox{room: make(chan struct{}, 1), hold: hold, sent: map[string][]*client.Incoming{},
		told: map[*client.Incoming]bool{}, changed: make(chan struct{}), unacked: map[string]*client.Incoming{}}
}

// await keeps a window taken for a cotal_inbox result until the result is written, and
// returns the window's id, which the result carries in its _meta (WindowMeta). ok is
// false once the session is over (all was called): the caller hands the window back.
func (b *inbox) await(window []*client.Incoming) (id string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return "", false
	}
	b.nextID++
	id = strconv.FormatUint(b.nextID, 10)
	b.sent[id] = window
	return id, true
}

// written removes and returns the window id once its result was written to the client.
func (b *inbox) written(id string) []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.sent[id]
	delete(b.sent, id)
	return w
}

// unsent puts the window id back at the head of the inbox: its result could not be
// written, so the model never had it.
func (b *inbox) unsent(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.sent[id]
	if !ok {
		return
	}
	delete(b.sent, id)
	b.items = append(slices.Clone(w), b.items...)
	b.notify()
}

// add holds in and reports whether the inbox is now full.
func (b *inbox) add(in *client.Incoming) (full bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.items = append(b.items, in)
	b.notify()
	return len(b.items) >= b.hold
}

// full reports whether the hold limit is reached.
func (b *inbox) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items) >= b.hold
}

// counts reports how many items are held, and how many of them are directed (DM or
// anycast).
func (b *inbox) counts() (total, directed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, in := range b.items {
		if isDirected(in) {
			directed++
		}
	}
	return len(b.items), directed
}

// lastDrain is when a window was last taken, in unix ms; 0 never.
func (b *inbox) lastDrain() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.drain
}

// isDirected reports whether in was addressed to this agent: a DM, an anycast, or a post
// that reached it because it mentions it.
func isDirected(in *client.Incoming) bool {
	return in.Kind != protocol.DeliveryChannel || protocol.IsMentionHandoff(in.Reason)
}

// rank orders a window: directed messages first, then live channel traffic, then
// history.
func rank(in *client.Incoming) int {
	switch {
	case isDirected(in):
		return 0
	case !in.Historical:
		return 1
	}
	return 2
}

// take removes and returns one window (see pick); now is stamped as the last drain.
func (b *inbox) take(maxItems, maxBytes int, now int64) []*client.Incoming {
	return b.takeWhere(maxItems, maxBytes, now, nil)
}

// takeWhere is take over the held messages match admits (nil admits all); the others
// stay held.
func (b *inbox) takeWhere(maxItems, maxBytes int, now int64, match func(*client.Incoming) bool) []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pick(maxItems, maxBytes, match)
	if len(out) == 0 && match != nil {
		return nil // a filtered call that found nothing answered no wake-up
	}
	b.drain = now
	b.woken = false // the model answered the last wake-up
	taken := map[*client.Incoming]bool{}
	for _, in := range out {
		taken[in] = true
	}
	b.remove(func(in *client.Incoming) bool { return taken[in] })
	return out
}

// peek returns the window take would return, without removing anything or counting as
// a drain: nothing is acked and the next take returns the same window.
func (b *inbox) peek(maxItems, maxBytes int) []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pick(maxItems, maxBytes, nil)
}

// drop removes and returns every held message gone reports (not the windows awaiting
// their write, which the model has been given).
func (b *inbox) drop(gone func(*client.Incoming) bool) []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*client.Incoming
	for _, in := range b.items {
		if gone(in) {
			out = append(out, in)
		}
	}
	b.remove(gone)
	return out
}

// pick selects one window: at most maxItems messages and maxBytes of text (at least one
// message, so an oversized one is still handed over), in rank order and arrival order
// within a rank, of those match admits (nil admits all); b.mu is held.
func (b *inbox) pick(maxItems, maxBytes int, match func(*client.Incoming) bool) []*client.Incoming {
	var out []*client.Incoming
	size := 0
	for r := 0; r <= 2 && len(out) < maxItems; r++ {
		for _, in := range b.items {
			if rank(in) != r || len(out) >= maxItems || (match != nil && !match(in)) {
				continue
			}
			n := approxSize(in)
			if len(out) > 0 && size+n > maxBytes {
				r = 3 // the window is full: stop at this message, keep order
				break
			}
			size += n
			out = append(out, in)
		}
	}
	return out
}

// remove deletes the held messages gone reports; b.mu is held.
func (b *inbox) remove(gone func(*client.Incoming) bool) {
	kept := b.items[:0]
	for _, in := range b.items {
		if !gone(in) {
			kept = append(kept, in)
		} else {
			delete(b.told, in)
		}
	}
	clear(b.items[len(kept):])
	b.items = kept
	b.signal()
}

// all removes and returns everything held, with the windows whose result was never
// written (on shutdown, to hand back to the broker).
func (b *inbox) all() []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.items
	b.items = nil
	b.closed = true
	clear(b.told)
	for id, w := range b.sent {
		out = append(out, w...)
		delete(b.sent, id)
	}
	for id, in := range b.unacked {
		out = append(out, in)
		delete(b.unacked, id)
	}
	b.notify() // a cotal_wait blocked on the inbox sees the session end
	return out
}

// signal wakes a reader waiting for room; b.mu is held.
func (b *inbox) signal() {
	if len(b.items) < b.hold {
		select {
		case b.room <- struct{}{}:
		default:
		}
	}
}

// approxSize is the bytes a message adds to a window; the text of a history item is
// shown in part (see shown), so it adds at most its summary.
func approxSize(in *client.Incoming) int {
	n, text := len(in.From.Name)+len(in.Channel)+64, 0
	for _, p := range in.Parts {
		n += len(p.Data) + len(p.Name) + len(p.Raw)
		text += len(p.Text)
	}
	if in.Historical {
		text = min(text, 4*SummaryChars+128) // at most SummaryChars runes and the marker
	}
	return n + text
}

// wakeup returns the held live messages (not history) that no wake-up named yet and
// that wakes admits (nil admits all), directed first, and marks them named; it returns
// nil while a wake-up is unanswered (no window taken since), so one arrival burst makes
// one wake-up. A message wakes does not admit stays held, unnamed.
func (b *inbox) wakeup(wakes func(*client.Incoming) bool) []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.woken || b.closed {
		return nil
	}
	var out []*client.Incoming
	for r := 0; r <= 1; r++ {
		for _, in := range b.items {
			if rank(in) == r && !b.told[in] && (wakes == nil || wakes(in)) {
				out = append(out, in)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, in := range out {
		b.told[in] = true
	}
	b.woken = true
	return out
}

// any reports whether a held message (not a window awaiting its write) satisfies ok.
func (b *inbox) any(ok func(*client.Incoming) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.ContainsFunc(b.items, ok)
}

// unwake undoes a wakeup whose notification could not be written.
func (b *inbox) unwake(named []*client.Incoming) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, in := range named {
		delete(b.told, in)
	}
	b.woken = false
}

// snapshot lists what is held, including windows not yet written, without removing it.
func (b *inbox) snapshot() []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]*client.Incoming(nil), b.items...)
	for _, w := range b.sent {
		out = append(out, w...)
	}
	for _, in := range b.unacked {
		out = append(out, in)
	}
	return out
}
