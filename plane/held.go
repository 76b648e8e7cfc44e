package plane

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Claim is a plane claim this service holds: the row it wrote and that row's revision.
// Its methods may be called from several goroutines.
type Claim struct {
	space string
	kv    Store

	mu       sync.Mutex
	row      Row
	rev      uint64
	released bool
}

// Row returns the row this claim wrote (state released once Release succeeded).
func (c *Claim) Row() Row {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.row
}

// Revision returns the revision of the row this claim wrote.
func (c *Claim) Revision() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rev
}

// Verify re-reads the row and checks it still names this claim: held, same claim id,
// generation and connection tuples. A row that differs, is gone or does not decode is a
// *Refusal with ReasonLost (ReasonCorrupt when it does not decode); a read error is
// returned wrapped.
func (c *Claim) Verify(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return c.lost("this claim was released")
	}
	now, err := c.read(ctx)
	if err != nil {
		return err
	}
	if now == nil {
		return c.lost("the row is gone")
	}
	if !c.same(*now) {
		return c.lost(describe(*now))
	}
	return nil
}

// Release marks the claim released with a compare-and-set on the exact revision it wrote,
// so a successor can claim the plane without asking the oracle. If the row changed under
// the claim, Release leaves it as it is and returns a *Refusal with ReasonLost naming what
// the row holds now. Releasing twice is a no-op.
func (c *Claim) Release(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	row := c.row
	row.State = StateReleased
	rev, err := c.kv.Update(ctx, Key, row.Encode(), c.rev)
	if conflict(err) {
		why := "the row changed under this claim"
		now, rerr := c.read(ctx)
		switch {
		case rerr != nil:
			why += fmt.Sprintf(" (re-read: %v)", rerr)
		case now == nil:
			why += " (it is gone)"
		default:
			why += " (" + describe(*now) + ")"
		}
		return c.lost(why + "; it was left as it is")
	}
	if err != nil {
		return fmt.Errorf("plane claim of space %q: release generation %d: %w", c.space, c.row.Generation, err)
	}
	c.row, c.rev, c.released = row, rev, true
	return nil
}

// read returns the stored row, nil when the key is absent.
func (c *Claim) read(ctx context.Context) (*Row, error) {
	e, err := c.kv.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plane claim of space %q: read %s %s: %w", c.space, bucket(c.space), Key, err)
	}
	r, err := DecodeRow(e.Value())
	if err != nil {
		return nil, corrupt(c.space, err)
	}
	return &r, nil
}

// same reports whether r still names this claim.
func (c *Claim) same(r Row) bool {
	return r.State == StateHeld && r.ClaimID == c.row.ClaimID && r.Generation == c.row.Generation &&
		r.Ledger == c.row.Ledger && r.Records == c.row.Records
}

// lost is the refusal of a claim whose row no longer names it.
func (c *Claim) lost(why string) *Refusal {
	return &Refusal{Space: c.space, Reason: ReasonLost,
		Why:  fmt.Sprintf("this service's claim (generation %d, claim id %s) no longer holds the plane: %s", c.row.Generation, c.row.ClaimID, why),
		Next: "another auth service may have taken the plane over; restart this one only if it should serve the space"}
}

// describe says what a row holds, for a person.
func describe(r Row) string {
	return fmt.Sprintf("now generation %d, state %s, claim id %s, ledger connection cid %d on server %s",
		r.Generation, r.State, r.ClaimID, r.Ledger.CID, r.Ledger.ServerID)
}
