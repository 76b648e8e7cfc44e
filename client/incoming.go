package client

import (
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
	// kept, set for a DM, hand-off copy or held ask, is the endpoint's keeper: from its
	// surfacing (or TakeAsks) until it is settled the copy is marked in progress, so the
	// broker does not redeliver it while it waits. May be nil.
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
