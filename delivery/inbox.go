package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// The reader moves what a reference delivery daemon's fan-out left in the mixed inbox
// INBOX_<space> to the members' hand-off subjects on DLV, as the reference's trusted
// reader does (endpoint.ts runReader / readerHandle): a reference fan-out writes one entry
// per member copy there (publishDinbox) and leaves the move to its reader, so entries it
// wrote before a Go daemon took the space over reach their members all the same. Go's own
// fan-out writes DLV directly and never writes INBOX.

// readerMaxDeliveries is how many times the reader takes one entry before it gives up on
// it (the reference's READER_MAX_REDELIVERIES): an entry for a member with no ACL row, or
// one whose copy cannot be stored, is terminated then, so it cannot hold up the others.
const readerMaxDeliveries = 10

// readerRetry is how long an entry waits before it is taken again after a deferral.
const readerRetry = 2 * time.Second

// readerMaxBackoff bounds the wait before the reader is tried again after a failure.
const readerMaxBackoff = 30 * time.Second

// readerMaxAckPending bounds the entries the reader holds unacked (the reference's
// DINBOX_MAX_ACK_PENDING).
const readerMaxAckPending = 1000

// ReaderConfig is the reader durable as the reference creates it (streams.ts
// inboxReaderConfig): every mixed inbox subject, explicit acks, every stored entry, at
// most 1000 held. ackWait is its redelivery wait.
func ReaderConfig(space string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerReader,
		FilterSubject: protocol.DinboxAll(space),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: readerMaxAckPending,
	}
}

// inboxReader consumes the reader durable while the daemon serves.
type inboxReader struct {
	space    string
	js       jetstream.JetStream
	ackWait  time.Duration
	roster   *view[memberRow, roster]
	acls     *view[*ACL, acls]
	gate     *gate
	log      *slog.Logger
	syncWait time.Duration
}

// run serves the reader in sessions while the gate is open, until ctx ends. A session
// that fails is tried again after a wait that doubles up to readerMaxBackoff (a credential
// minted before its INBOX grants, say, fails until the daemon restarts with a new one).
func (r *inboxReader) run(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for {
		if err := r.gate.wait(ctx); err != nil {
			return nil
		}
		began := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(began) > readerMaxBackoff {
			backoff = 200 * time.Millisecond // it served a while: a new fault starts over
		}
		wait := 200 * time.Millisecond // a session ends on a fault or a closed gate
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			// A space provisioned before INBOX existed: `cotal up` adds it; until then no
			// reference fan-out can have written anything to move.
			r.log.Info("no mixed inbox stream yet; run `cotal up` to add it", "stream", protocol.StreamInbox(r.space))
			wait = readerMaxBackoff
		case err != nil:
			r.log.Warn("inbox reader restarts", "err", err, "in", backoff)
			wait, backoff = backoff, min(2*backoff, readerMaxBackoff)
		default:
			backoff = 200 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// ensure binds the reader durable, creating it as the reference does when absent; an
// existing one (made by this or a reference daemon) is used as it is.
func (r *inboxReader) ensure(ctx context.Context) (jetstream.Consumer, error) {
	stream := protocol.StreamInbox(r.space)
	cons, err := r.js.Consumer(ctx, stream, protocol.ConsumerReader)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = r.js.CreateConsumer(ctx, stream, ReaderConfig(r.space, r.ackWait))
		if errors.Is(err, jetstream.ErrConsumerExists) {
			return r.js.Consumer(ctx, stream, protocol.ConsumerReader)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reader durable %s on %s: %w", protocol.ConsumerReader, stream, err)
	}
	return cons, nil
}

// session consumes the durable until ctx ends, the gate closes or an entry fails. An
// entry taken and not settled is delivered again after the ack wait.
func (r *inboxReader) session(ctx context.Context) error {
	cons, err := r.ensure(ctx)
	if err != nil {
		return err
	}
	in := make(chan jetstream.Msg, 64)
	stop := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-stop:
		}
	}, jetstream.PullMaxMessages(64), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		r.log.Debug("inbox reader consume", "err", err)
	}))
	if err != nil {
		return fmt.Errorf("consume the reader durable: %w", err)
	}
	defer func() {
		close(stop)
		cc.Stop()
	}()
	closed := r.gate.closed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return nil
		case m := <-in:
			if err := r.handle(ctx, m); err != nil {
				_ = m.Nak()
				return err
			}
		}
	}
}

// handle settles one entry: the member's current ACL row must let it read the channel
// (an absent row defers the entry, which is terminated after readerMaxDeliveries), a
// durable-channel entry's CHAT sequence must lie inside the member's membership of that
// channel, and then the reference's frame is stored on the member's hand-off subject
// before the entry is acked. An entry that is not one (bad subject, bad body) and one no
// longer authorized are acked and dropped. It returns an error only when the views could
// not be brought up to date; the entry then comes back.
func (r *inboxReader) handle(ctx context.Context, m jetstream.Msg) error {
	p, uid, err := protocol.ParseDinbox(r.space, m.Subject())
	if err != nil {
		r.log.Warn("inbox entry dropped", "err", err)
		return r.settle(m.Ack)
	}
	var e protocol.InboxEntry
	var head struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(m.Data(), &e); err != nil || protocol.CheckConcreteChannel(e.Channel) != nil ||
		json.Unmarshal(e.Msg, &head) != nil || head.ID == nil {
		r.log.Warn("inbox entry dropped: not an entry", "subject", m.Subject())
		return r.settle(m.Ack)
	}
	if err := r.fresh(ctx); err != nil {
		return err
	}
	mem := member{p: p, uid: uid}
	delivered := uint64(1)
	if meta, err := m.Metadata(); err == nil {
		delivered = meta.NumDelivered
	}
	acl := r.acls.snapshot().byMember[mem.key()]
	if acl == nil {
		if delivered >= readerMaxDeliveries {
			r.log.Warn("inbox entry terminated: no read ACL on record", "member", mem.key(), "deliveries", delivered)
			return r.settle(m.Term)
		}
		return r.settle(func() error { return m.NakWithDelay(readerRetry) })
	}
	if !acl.Readable(e.Channel) {
		return r.settle(m.Ack) // the member may no longer read the channel
	}
	if e.Reason == protocol.HandoffDurableChannel && !r.within(mem, e) {
		return r.settle(m.Ack) // outside the membership: before the join or after the leave
	}
	body, err := protocol.EncodeDeliveryFrame(e.Channel, e.Msg)
	if err != nil {
		r.log.Warn("inbox entry dropped", "subject", m.Subject(), "err", err)
		return r.settle(m.Ack)
	}
	h := nats.Header{}
	h.Set(protocol.HeaderDeliveryFrame, protocol.FrameVersion)
	h.Set(protocol.HeaderSeq, strconv.FormatUint(e.Seq, 10))
	h.Set(protocol.HeaderReason, e.Reason)
	if *head.ID != "" {
		h.Set(jetstream.MsgIDHeader, protocol.DLVMsgID(*head.ID, p, uid, e.Generation))
	}
	if !r.gate.isOpen() {
		return nil // no longer serving: the entry comes back to whoever serves
	}
	if _, err := r.js.PublishMsg(ctx, &nats.Msg{Subject: protocol.DLVSubject(r.space, p, uid), Header: h, Data: body}); err != nil {
		if delivered >= readerMaxDeliveries {
			r.log.Warn("inbox entry terminated: its copy could not be stored", "member", mem.key(), "deliveries", delivered, "err", err)
			return r.settle(m.Term)
		}
		r.log.Debug("inbox entry deferred: store copy", "member", mem.key(), "err", err)
		return r.settle(func() error { return m.NakWithDelay(readerRetry) })
	}
	return r.settle(m.Ack)
}

// within reports whether the member's row of the entry's channel covers its sequence.
func (r *inboxReader) within(mem member, e protocol.InboxEntry) bool {
	for _, row := range r.roster.snapshot().byMember[mem.key()] {
		if row.Channel == e.Channel && row.Covers(e.Seq) {
			return true
		}
	}
	return false
}

// settle sends one ack reply; a lost one only brings the entry back.
func (r *inboxReader) settle(f func() error) error {
	if err := f(); err != nil {
		r.log.Debug("inbox entry not settled; it comes back", "err", err)
	}
	return nil
}

// fresh brings the members and ACL views up to their buckets' current state, so an entry
// is judged by the rows as they are now (the reference reads both per entry).
func (r *inboxReader) fresh(ctx context.Context) error {
	if err := r.acls.sync(ctx, r.syncWait); err != nil {
		return err
	}
	return r.roster.sync(ctx, r.syncWait)
}
