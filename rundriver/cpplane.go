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

// settleCP records how a checkpoint settled (resumed with an answer, or expired) on its
// status and its create-only settle fact, each left as it is when already written.
func (d *drive) settleCP(ctx context.Context, x external, settle, answerID string, ts int64) error {
	if err := d.ensureCP(ctx, x); err != nil {
		return err
	}
	ep := d.cfg.endpoint()
	h := &runstore.CheckpointHolder{ID: d.lease.Holder, LifecycleUID: d.lease.Holder}
	var spec runstore.CheckpointSpec
	if _, err := d.recs.Get(ctx, runstore.CheckpointSpecKey(ep, x.Token), &spec); err == nil && spec.Holder.ID != "" {
		// Settled as the holder that minted it (an earlier driver's, after a takeover), as
		// an answer resumes it: both writers of the settle fact write the same fact.
		h = &spec.Holder
	}
	var st runstore.CheckpointStatus
	rev, err := d.recs.Get(ctx, runstore.CheckpointStatusKey(ep, x.Token), &st)
	if err != nil {
		return fmt.Errorf("checkpoint %s status: %w", x.Token, err)
	}
	if st.State == runstore.CheckpointWaiting {
		st.State, st.SettledGeneration, st.SettledHolder, st.SettledTs, st.SettledAnswerID = settle, 1, h, &ts, answerID
		if _, err := d.recs.Update(ctx, runstore.CheckpointStatusKey(ep, x.Token), st, rev); err != nil && !errors.Is(err, runstore.ErrConflict) {
			return err
		}
	}
	fact := runstore.SettleFact{V: 1, Token: x.Token, Settle: settle, Generation: 1, Holder: h, Ts: ts, AnswerID: answerID}
	if err := runstore.PublishSettleFact(ctx, d.cfg.JS, d.cfg.Space, ep, fact); err != nil && !errors.Is(err, runstore.ErrSettled) {
		return fmt.Errorf("checkpoint %s: %w", x.Token, err)
	}
	return nil // a fact settled before stands as first written
}
