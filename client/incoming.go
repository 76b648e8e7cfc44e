package client

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Incoming is one surfaced message with its receiver-side metadata.
type Incoming struct {
	protocol.Message
	Kind       protocol.DeliveryKind // from the delivering subject, never the payload
	Subject    protocol.Subject
	Historical bool   // a replayed channel message from before this endpoint joined
	Durable    bool   // Ack commits a JetStream copy
	Seq        uint64 // stream sequence of a JetStream copy, 0 for a live copy
	// Delivered counts the deliveries of a JetStream copy: 1 the first time, more when it
	// was redelivered (an ask whose holder died, a DM not acked in time); 0 for a live copy.
	Delivered uint64
	// Reason is why the delivery daemon made a hand-off copy (a protocol.Handoff* value,
	// such as a mention of this agent); "" for every other copy.
	Reason string

	msg    jetstream.Msg // the JetStream copy that Ack and Nak settle; nil for a live copy
	settle func()        // called once when the copy is settled (frees an ask slot); may be nil
	// handled, set under Endpoint.TakeOnAck, tells the endpoint the application took the
	// message (Ack): the positions it confirms may then cover it. May be nil.
	handled func()
	// again, set for a copy that has one source (a DM, an anycast), is the id window
	// that lets the copy's id (againID, as it arrived) surface again: a Nak asks for a
	// redelivery, which the window would otherwise drop as a duplicate (and ack). May be
	// nil. A pointer and a string, not a closure: a closure over the received message
	// would move it to the heap on every delivery.
	again   *dedupe
	againID string
	// kept, set for a DM or hand-off copy, is the endpoint's keeper: from its surfacing
	// until it is settled the copy is marked in progress, so the broker does not
	// redeliver it while it waits. May be nil.
	kept *keeper
}

// Ack confirms a durable copy was handled, so it is not redelivered. For a live or
// historical copy it does nothing at the broker; under Endpoint.TakeOnAck it tells the
// endpoint the message was taken.
func (in *Incoming) Ack() error {
	if in.handled != nil {
		in.handled()
	}
	if in.msg == nil {
		return nil
	}
	defer in.settled()
	return in.msg.Ack()
}

// Nak asks for a durable copy to be redelivered soon, to this endpoint while it consumes
// (a DM or an anycast surfaces again, its id let through once more). It is a no-op for
// live copies. An endpoint that is closing hands a copy back instead (HandBack).
func (in *Incoming) Nak() error {
	if in.msg == nil {
		return nil
	}
	defer in.settled()
	if in.again != nil {
		in.again.forget(in.againID)
	}
	return in.msg.Nak()
}

// InProgress tells the broker the application is still working on a durable copy, which
// restarts its ack wait. The endpoint does this by itself for every durable copy it
// surfaced or holds (DMs, hand-off copies, asks) until it is acked or naked, so an
// application need not; it is a no-op for live copies.
func (in *Incoming) InProgress() error {
	if in.msg == nil {
		return nil
	}
	return in.msg.InProgress()
}

func (in *Incoming) settled() {
	if in.kept != nil {
		in.kept.drop(in)
	}
	if in.settle != nil {
		in.settle()
	}
}

// dedupe remembers the last n non-empty message ids.
//
// An id of at most shortID bytes (a UUID, as every sender of the spec makes) is kept as
// a fixed-size value, not a string: no copy of it is allocated, its lookup compares it in
// place, and the window holds no pointers for the garbage collector to scan. A longer id
// is kept as a string in a map of its own; which map holds an id depends only on its
// length, so each id has exactly one place. Each map gives the id's slot in the ring, so
// forget empties the slot too: a slot reused then drops only an id recorded there (an id
// forgotten and recorded again lives in its newer slot alone).
type dedupe struct {
	mu    sync.Mutex
	ids   map[idKey]int
	long  map[string]int
	ring  []idKey  // the window, oldest at next; a zero key is a long id's slot (or none)
	longs []string // the long id of each slot, "" for none
	next  int
	size  int    // the window's length; the ring grows to it as ids arrive
	added uint64 // ids recorded so far
}

// shortID is the longest id kept as an idKey.
const shortID = 39

// idKey is an id of 1 to shortID bytes: its length and its bytes, zero-padded.
type idKey struct {
	n uint8
	b [shortID]byte
}

// keyOf returns id's key, ok false for an id longer than shortID (or empty).
func keyOf(id string) (k idKey, ok bool) {
	if len(id) == 0 || len(id) > shortID {
		return k, false
	}
	k.n = uint8(len(id))
	copy(k.b[:], id)
	return k, true
}

func newDedupe(n int) *dedupe {
	// Nothing is reserved up front: an endpoint that receives little holds little.
	return &dedupe{ids: map[idKey]int{}, long: map[string]int{}, size: n}
}

// first records id and reports whether it was not seen before. An empty id is never a
// dedupe key, so it is always first.
func (d *dedupe) first(id string) bool {
	if id == "" {
		return true
	}
	k, short := keyOf(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if short {
		if _, ok := d.ids[k]; ok {
			return false
		}
	} else if _, ok := d.long[id]; ok {
		return false
	}
	if len(d.ring) < d.size {
		d.ring, d.longs = append(d.ring, idKey{}), append(d.longs, "")
	} else {
		if old := d.ring[d.next]; old.n != 0 {
			delete(d.ids, old)
		}
		if old := d.longs[d.next]; old != "" {
			delete(d.long, old)
		}
	}
	if short {
		d.ring[d.next], d.longs[d.next] = k, ""
		d.ids[k] = d.next
	} else {
		id = strings.Clone(id) // the id may share memory with a whole message body
		d.ring[d.next], d.longs[d.next] = idKey{}, id
		d.long[id] = d.next
	}
	d.next = (d.next + 1) % d.size
	d.added++
	return true
}

// forget lets id be first again.
func (d *dedupe) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k, short := keyOf(id); short {
		if slot, ok := d.ids[k]; ok {
			delete(d.ids, k)
			d.ring[slot] = idKey{}
		}
	} else if slot, ok := d.long[id]; ok {
		delete(d.long, id)
		d.longs[slot] = ""
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
