package client

import (
	"sync"
	"time"
)

// keeper keeps the broker from redelivering the durable copies this endpoint surfaced
// or holds while the application has not settled them (DMs, hand-off copies, and the
// role's asks, whether taken by the endpoint or by TakeAsks): every third of the
// shortest ack wait of the durables it consumes, it marks each such copy in progress,
// and the hand-off copies the endpoint holds for posts surfaced live too
// (positions.held). One loop (keepLoop) does it for the whole endpoint.
//
// Without it a DM that waited in Messages() (or in the application's hands) for longer
// than its ack wait came back to this same session, where the id window judged it a
// duplicate and acked it: the broker then counted as handled a message the application
// had not read, lost if the process died before it did. A redelivery of a copy still
// outstanding here is not acked either (outstanding), in case a tick came too late.
type keeper struct {
	mu      sync.Mutex
	byID    map[string]*Incoming // surfaced, unsettled durable copies by message id
	every   time.Duration        // a third of the shortest ack wait seen; 0 before any
	started bool
	wake    chan struct{} // told when every shrinks under a running loop
}

// add records in, a durable copy about to be surfaced, until it is settled (drop).
func (k *keeper) add(in *Incoming) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID == nil {
		k.byID = map[string]*Incoming{}
	}
	k.byID[in.ID] = in
}

// drop forgets in once it is settled (or was never surfaced).
func (k *keeper) drop(in *Incoming) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byID[in.ID] == in {
		delete(k.byID, in.ID)
	}
}

// outstanding reports whether the copy at stream sequence seq with this id is one this
// endpoint surfaced and the application has not settled: a redelivery of it is the same
// message still in the application's hands, not a duplicate to ack.
func (k *keeper) outstanding(id string, seq uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	in, ok := k.byID[id]
	return ok && seq != 0 && in.Seq == seq
}

// snapshot returns the copies outstanding now.
func (k *keeper) snapshot() []*Incoming {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*Incoming, 0, len(k.byID))
	for _, in := range k.byID {
		out = append(out, in)
	}
	return out
}

// bound notes a durable with ackWait that this endpoint consumes, and reports whether
// the keeping loop is to be started (the first call). A running loop waiting out a
// longer period is woken, so a durable with a shorter ack wait bound later (the role's
// asks after the DMs) is kept from its first copy on.
func (k *keeper) bound(ackWait time.Duration) (start bool) {
	if ackWait <= 0 {
		ackWait = 30 * time.Second // the server's default
	}
	every := max(ackWait/3, 10*time.Millisecond)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.wake == nil {
		k.wake = make(chan struct{}, 1)
	}
	if k.every == 0 || every < k.every {
		if k.started && k.every != 0 {
			select {
			case k.wake <- struct{}{}:
			default: // a wake is pending already
			}
		}
		k.every = every
	}
	start, k.started = !k.started, true
	return start
}

// woken is told when the period shrinks under a running loop.
func (k *keeper) woken() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.wake
}

// period is how often the loop marks the copies in progress.
func (k *keeper) period() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.every
}

// keepFor notes a durable with ackWait whose copies this endpoint keeps (keeper.bound)
// and starts the keeping loop unless it runs already. It may be called any number of
// times, from any goroutine; after Close it starts nothing.
func (e *Endpoint) keepFor(ackWait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keepForLocked(ackWait)
}

// keepForLocked is keepFor with e.mu held: the loop joins e.wg only while Close has not
// begun, so Close's wait covers it.
func (e *Endpoint) keepForLocked(ackWait time.Duration) {
	if e.closed {
		return
	}
	if e.kept.bound(ackWait) {
		e.wg.Add(1)
		go e.keepLoop()
	}
}

// keepLoop marks the outstanding copies in progress every period, until Close. It marks
// them at once when a shorter period is bound (keeper.bound).
func (e *Endpoint) keepLoop() {
	defer e.wg.Done()
	wake := e.kept.woken()
	t := time.NewTimer(e.kept.period())
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		for _, in := range e.kept.snapshot() {
			if err := in.InProgress(); err != nil {
				e.log.Debug("keep copy", "id", in.ID, "err", err)
			}
		}
		for _, m := range e.pos.heldCopies() {
			if err := m.InProgress(); err != nil {
				e.log.Debug("keep held copy", "subject", m.Subject(), "err", err)
			}
		}
		t.Reset(e.kept.period())
	}
}
