package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxTakeAsks bounds how many asks one TakeAsks call takes.
const MaxTakeAsks = 20

// ErrNoRole reports a role operation on an endpoint that serves no role.
var ErrNoRole = errors.New("the endpoint serves no role")

// roleConsumer is the role's anycast durable once Join bound it, else nil.
func (e *Endpoint) roleConsumer() jetstream.Consumer {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.roleCons
}

// RoleBacklog is how many asks wait in the queue of this endpoint's role: stored on the
// role's durable and not yet taken by any holder (its num_pending). The asks holders took
// and have not settled are not counted. It fails with ErrNoRole for an endpoint without a
// role, and before Join.
func (e *Endpoint) RoleBacklog(ctx context.Context) (int, error) {
	cons := e.roleConsumer()
	if cons == nil {
		return 0, ErrNoRole
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("backlog of role %s: %w", e.cfg.Role, e.refused(err))
	}
	return int(info.NumPending), nil
}

// TakeAsks takes up to n asks (1 to MaxTakeAsks) from the queue of this endpoint's role at
// once and returns them; they do not pass through Messages(). It waits for none: it returns
// what the queue holds now, possibly nothing. Each ask is held as the ones the endpoint
// takes by itself (Config.MaxAsks): its ack wait is extended until the caller settles it
// with Ack or Nak, which the caller must do for each one. An ask this endpoint has
// surfaced before is acked and left out, unless it is a redelivery of one still held
// here unsettled: that one is left out and left to its holder's Ack. It fails with
// ErrNoRole for an endpoint without a role, and before Join.
func (e *Endpoint) TakeAsks(ctx context.Context, n int) ([]*Incoming, error) {
	if n < 1 || n > MaxTakeAsks {
		return nil, fmt.Errorf("take %d asks: want 1 to %d", n, MaxTakeAsks)
	}
	cons := e.roleConsumer()
	if cons == nil {
		return nil, ErrNoRole
	}
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		return nil, fmt.Errorf("take asks of role %s: %w", e.cfg.Role, e.refused(err))
	}
	e.keepFor(askAckWait(cons)) // idempotent: Join started the keeping loop for the role
	var out []*Incoming
	for m := range batch.Messages() {
		if in := e.heldAsk(m); in != nil {
			out = append(out, in)
		}
	}
	if err := batch.Error(); err != nil && len(out) == 0 && ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, fmt.Errorf("take asks of role %s: %w", e.cfg.Role, e.refused(err))
	}
	return out, nil
}

// heldAsk turns one ask taken by TakeAsks into an Incoming held until settled, the
// keeper marking it in progress meanwhile, or nil when it is malformed (terminated), a
// duplicate (acked), a redelivery of an ask held here unsettled (left to its holder's
// Ack), or the endpoint is closing (naked, for another holder to take now).
func (e *Endpoint) heldAsk(m jetstream.Msg) *Incoming {
	r, ok := e.check(m.Subject(), m.Data())
	if !ok {
		if err := m.Term(); err != nil {
			e.log.Warn("term", "subject", m.Subject(), "err", err)
		}
		return nil
	}
	in := &Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Durable: true, msg: m, kept: &e.kept}
	in.again, in.againID = e.seen, r.Message.ID
	in.Seq, in.Delivered = copyNumbers(m)
	if !e.seen.first(r.Message.ID) {
		if e.kept.outstanding(in.ID, in.Seq) {
			e.log.Debug("redelivered copy still unsettled here: left to the application's ack", "id", in.ID, "seq", in.Seq)
			return nil
		}
		if err := m.Ack(); err != nil {
			e.log.Warn("ack duplicate", "id", r.Message.ID, "err", err)
		}
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		if err := in.Nak(); err != nil { // closing: another holder takes it now
			e.log.Debug("nak ask", "id", in.ID, "err", err)
		}
		return nil
	}
	e.kept.add(in) // before the caller can have it, and settle it
	return in
}
