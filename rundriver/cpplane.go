package rundriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/cotal-ai/cotal/runstore"
)

// The checkpoint plane a checkpoint leaves for readers of the reference's shape (its
// endpoint-checkpoint records): the spec and status records cp.<ep>.<token>.spec and
// .status in the records bucket, and once settled the create-only settle fact on
// cotal.<space>.epf.<ep>.cp.<token>. The journal stays the authority of the run: the
// plane is written after the journal binds the checkpoint and before the journal settles
// it, each write created if missing, so a resume completes what a crash left half done.

// ensureCP writes a bound checkpoint's spec and waiting status when they are missing.
func (d *drive) ensureCP(ctx context.Context, x external) error {
	ep := d.cfg.endpoint()
	var spec runstore.CheckpointSpec
	rev, err := d.recs.Get(ctx, runstore.CheckpointSpecKey(ep, x.Token), &spec)
	if errors.Is(err, runstore.ErrNoRecord) {
		h := runstore.CheckpointHolder{ID: d.lease.Holder, LifecycleUID: d.lease.Holder}
		if err := d.recs.Create(ctx, runstore.CheckpointSpecKey(ep, x.Token), runstore.CheckpointSpec{V: 1, Token: x.Token, Holder: h, MintedAt: x.Since, InitialDeadline: x.Deadline}); err != nil {
			return err
		}
		rev, err = d.recs.Get(ctx, runstore.CheckpointSpecKey(ep, x.Token), &spec)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s spec: %w", x.Token, err)
	}
	var st runstore.CheckpointStatus
	if _, err := d.recs.Get(ctx, runstore.CheckpointStatusKey(ep, x.Token), &st); errors.Is(err, runstore.ErrNoRecord) {
		st = runstore.CheckpointStatus{State: runstore.CheckpointWaiting, DeadlineGeneration: 1, Deadline: spec.InitialDeadline, ObservedSpecRevision: int64(rev)}
		if err := d.recs.Create(ctx, runstore.CheckpointStatusKey(ep, x.Token), st); err != nil && !errors.Is(err, runstore.ErrConflict) {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("checkpoint %s status: %w", x.Token, err)
	}
	return nil
}

// cpSettle is how a checkpoint settled on its plane: the settle its status records, which
// the first CAS from waiting decided (the driver's expiry or resume, or an answerer's
// resume), with the answer it accepted and when.
type cpSettle struct {
	Settle   string
	AnswerID string
	Ts       int64
}

// settleCP settles a checkpoint on its plane as settle (resumed with answerID, or
// expired) unless another settle won it first, and answers the settle that stands. The
// status CAS from waiting is the arbiter, for the driver as for an answerer presenting the
// token (runstore's present): a lost CAS re-reads the status, and the settle fact is
// derived from the status that won, so whichever of the two writes it, the fact, the
// status and the journal's settle (the caller's, from what this answers) agree.
func (d *drive) settleCP(ctx context.Context, x external, settle, answerID string, ts int64) (cpSettle, error) {
	if err := d.ensureCP(ctx, x); err != nil {
		return cpSettle{}, err
	}
	if d.cfg.beforeSettleCP != nil {
		d.cfg.beforeSettleCP(x.Token)
	}
	ep := d.cfg.endpoint()
	key := runstore.CheckpointStatusKey(ep, x.Token)
	h := &runstore.CheckpointHolder{ID: d.lease.Holder, LifecycleUID: d.lease.Holder}
	var spec runstore.CheckpointSpec
	if _, err := d.recs.Get(ctx, runstore.CheckpointSpecKey(ep, x.Token), &spec); err == nil && spec.Holder.ID != "" {
		// Settled as the holder that minted it (an earlier driver's, after a takeover), as
		// an answer resumes it: both writers of the settle fact write the same fact.
		h = &spec.Holder
	}
	var st runstore.CheckpointStatus
	for range 5 {
		st = runstore.CheckpointStatus{}
		rev, err := d.recs.Get(ctx, key, &st)
		if err != nil {
			return cpSettle{}, fmt.Errorf("checkpoint %s status: %w", x.Token, err)
		}
		if st.State != runstore.CheckpointWaiting {
			break // settled before, by this run's driver or by an answerer
		}
		mine := st
		mine.State, mine.SettledGeneration, mine.SettledHolder, mine.SettledTs, mine.SettledAnswerID = settle, max(st.DeadlineGeneration, 1),
			h, &ts, answerID
		if _, err := d.recs.Update(ctx, key, mine, rev); err == nil {
			st = mine
			break
		} else if !errors.Is(err, runstore.ErrConflict) {
			return cpSettle{}, fmt.Errorf("checkpoint %s status: %w", x.Token, err)
		}
	}
	if st.State == runstore.CheckpointWaiting || st.SettledTs == nil {
		return cpSettle{}, fmt.Errorf("checkpoint %s status: still %s after its CAS was lost: %w", x.Token, st.State, runstore.ErrConflict)
	}
	won := cpSettle{Settle: st.State, AnswerID: st.SettledAnswerID, Ts: *st.SettledTs}
	fact := runstore.SettleFact{V: 1, Token: x.Token, Settle: st.State, Generation: max(st.SettledGeneration, 1),
		Holder: st.SettledHolder, Ts: won.Ts, AnswerID: won.AnswerID}
	if err := runstore.PublishSettleFact(ctx, d.cfg.JS, d.cfg.Space, ep, fact); err != nil {
		if !errors.Is(err, runstore.ErrSettled) {
			return won, fmt.Errorf("checkpoint %s: %w", x.Token, err)
		}
		// A fact other than the one the status implies: an older driver's, written before
		// settles were derived from the status. The status stays the arbiter.
		d.log.Warn("checkpoint settle fact differs from its status", "run", d.run, "token", x.Token, "status", st.State)
	}
	return won, nil
}
