package plane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// Store is what a claim needs of the auth bucket; jetstream.KeyValue has it. Get returns
// jetstream.ErrKeyNotFound for an absent key, Create jetstream.ErrKeyExists for a present
// one, and Update jetstream.ErrKeyRevisionMismatch when the revision is not the latest.
type Store interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
}

// Claimer claims the plane of one space for this auth service's sealed scanner
// connections, ledger and records (one connection may fill both). Set its fields, then
// call Acquire.
type Claimer struct {
	Space   string             // space token; required
	KV      Store              // the space's auth bucket (provision.BucketAuth); required
	Oracle  Oracle             // asked whether a held claim's holder is gone; required
	Ledger  protocol.ConnTuple // this service's ledger scanner connection (see ConnTuple); required
	Records protocol.ConnTuple // this service's records scanner connection; required
	Logger  *slog.Logger       // nil means discard
}

// check validates the fields without I/O.
func (c *Claimer) check() error {
	if err := protocol.CheckSpace(c.Space); err != nil {
		return err
	}
	if c.KV == nil {
		return errors.New("no auth bucket")
	}
	if c.Oracle == nil {
		return errors.New("no liveness oracle")
	}
	for name, t := range map[string]protocol.ConnTuple{"ledger": c.Ledger, "records": c.Records} {
		if err := checkTuple(t); err != nil {
			return fmt.Errorf("own %s connection: %w", name, err)
		}
	}
	return nil
}

// Acquire claims the plane (see the package doc) and returns the held claim. It refuses
// with a *Refusal (ReasonLivePeer, ReasonUnknown, ReasonConcurrent, ReasonCorrupt); any
// other error is a config or broker error naming the step.
func (c *Claimer) Acquire(ctx context.Context) (*Claim, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("plane claim of space %q: config: %w", c.Space, err)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id := newClaimID()
	for try := 1; try <= 2; try++ {
		cl, lost, err := c.attempt(ctx, id)
		if err != nil || !lost {
			if cl != nil {
				log.Info("plane claimed", "generation", cl.row.Generation, "claim", id)
			}
			return cl, err
		}
		log.Info("plane claim row changed under the claim", "try", try)
	}
	return nil, &Refusal{Space: c.Space, Reason: ReasonConcurrent,
		Why:  "the plane row changed under this claim twice in a row: another auth service is claiming the plane at the same time",
		Next: "run one auth service per space: stop the other one, then start this one again"}
}

// attempt reads the row once and decides. lost reports a lost compare-and-set: the row
// changed between the read and the write, and nothing was written.
func (c *Claimer) attempt(ctx context.Context, id string) (cl *Claim, lost bool, err error) {
	mine := Row{V: Version, Generation: 1, ClaimID: id, State: StateHeld,
		Ledger: c.Ledger, Records: c.Records, OpenedAt: Instant(time.Now().UnixMilli())}
	e, err := c.KV.Get(ctx, Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		rev, err := c.KV.Create(ctx, Key, mine.Encode())
		return c.written(mine, rev, err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("plane claim of space %q: read %s %s: %w", c.Space, bucket(c.Space), Key, err)
	}
	prev, err := DecodeRow(e.Value())
	if err != nil {
		return nil, false, corrupt(c.Space, err)
	}
	if prev.State == StateHeld {
		q := prev.Tuples()
		res, err := c.Oracle.Liveness(ctx, q)
		if r := judge(c.Space, prev, q, res, err); r != nil {
			return nil, false, r
		}
	}
	mine.Generation = prev.Generation + 1
	rev, err := c.KV.Update(ctx, Key, mine.Encode(), e.Revision())
	return c.written(mine, rev, err)
}

// written turns the result of a claim write into the claim, a lost compare-and-set or an
// error.
func (c *Claimer) written(row Row, rev uint64, err error) (*Claim, bool, error) {
	switch {
	case conflict(err):
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("plane claim of space %q: write generation %d: %w", c.Space, row.Generation, err)
	}
	return &Claim{space: c.Space, kv: c.KV, row: row, rev: rev}, false, nil
}

// conflict reports whether err is a lost compare-and-set: a create of a present key or an
// update of a revision that is no longer the latest.
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// corrupt is the refusal of an undecodable row, with the repair.
func corrupt(space string, err error) *Refusal {
	return &Refusal{Space: space, Reason: ReasonCorrupt, Err: err,
		Why: fmt.Sprintf("the row %s %s cannot be read: %v", bucket(space), Key, err),
		Next: fmt.Sprintf("stop every auth service of the space, then repair the row with `%s` (the next claim writes generation 1)",
			repairCommand(space))}
}

// bucket names the space's auth bucket.
func bucket(space string) string { return provision.BucketAuth(space) }

// newClaimID returns a fresh random claim id: 128 bits, hex.
func newClaimID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
