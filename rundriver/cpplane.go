package rundriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// The checkpoint plane a checkpoint leaves for readers of the reference's shape (its
// endpoint-checkpoint records): the spec and status records cp.<ep>.<token>.spec and
// .status in the records bucket, and once settled the create-only settle fact on
// cotal.<space>.epf.<ep>.cp.<token>. The journal stays the authority of the run: the
// plane is written after the journal binds the checkpoint and before the journal settles
// it, each write created if missing, so a resume completes what a crash left half done.

type cpHolder struct {
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
}

type cpSpec struct {
	V               int      `json:"v"`
	Token           string   `json:"token"`
	Holder          cpHolder `json:"holder"`
	MintedAt        int64    `json:"mintedAt"`
	InitialDeadline int64    `json:"initialDeadline"`
}

type cpStatus struct {
	State                string    `json:"state"` // waiting, resumed or expired
	DeadlineGeneration   int       `json:"deadlineGeneration"`
	Deadline             int64     `json:"deadline"`
	ObservedSpecRevision uint64    `json:"observedSpecRevision"`
	SettledGeneration    int       `json:"settledGeneration,omitempty"`
	SettledHolder        *cpHolder `json:"settledHolder,omitempty"`
	SettledTs            int64     `json:"settledTs,omitempty"`
	SettledAnswerID      string    `json:"settledAnswerId,omitempty"`
}

type cpFact struct {
	V          int       `json:"v"`
	Token      string    `json:"token"`
	Settle     string    `json:"settle"`
	Generation int       `json:"generation"`
	Holder     *cpHolder `json:"holder,omitempty"`
	Ts         int64     `json:"ts"`
	AnswerID   string    `json:"answerId,omitempty"`
}

func cpKey(endpoint, token, part string) string { return "cp." + endpoint + "." + token + "." + part }

// CPFactSubject is where a checkpoint's settle fact is published.
func CPFactSubject(space, endpoint, token string) string {
	return protocol.Root + "." + space + ".epf." + endpoint + ".cp." + token
}

// ensureCP writes a bound checkpoint's spec and waiting status when they are missing.
func (d *drive) ensureCP(ctx context.Context, x external) error {
	ep := d.cfg.endpoint()
	var spec cpSpec
	rev, err := d.recs.Get(ctx, cpKey(ep, x.Token, "spec"), &spec)
	if errors.Is(err, runstore.ErrNoRecord) {
		h := cpHolder{ID: d.lease.Holder, LifecycleUID: d.lease.Holder}
		if err := d.recs.Create(ctx, cpKey(ep, x.Token, "spec"), cpSpec{V: 1, Token: x.Token, Holder: h, MintedAt: x.Since, InitialDeadline: x.Deadline}); err != nil {
			return err
		}
		rev, err = d.recs.Get(ctx, cpKey(ep, x.Token, "spec"), &spec)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s spec: %w", x.Token, err)
	}
	var st cpStatus
	if _, err := d.recs.Get(ctx, cpKey(ep, x.Token, "status"), &st); errors.Is(err, runstore.ErrNoRecord) {
		st = cpStatus{State: "waiting", DeadlineGeneration: 1, Deadline: spec.InitialDeadline, ObservedSpecRevision: rev}
		if err := d.recs.Create(ctx, cpKey(ep, x.Token, "status"), st); err != nil && !errors.Is(err, runstore.ErrConflict) {
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
	h := &cpHolder{ID: d.lease.Holder, LifecycleUID: d.lease.Holder}
	var st cpStatus
	rev, err := d.recs.Get(ctx, cpKey(ep, x.Token, "status"), &st)
	if err != nil {
		return fmt.Errorf("checkpoint %s status: %w", x.Token, err)
	}
	if st.State == "waiting" {
		st.State, st.SettledGeneration, st.SettledHolder, st.SettledTs, st.SettledAnswerID = settle, 1, h, ts, answerID
		if _, err := d.recs.Update(ctx, cpKey(ep, x.Token, "status"), st, rev); err != nil && !errors.Is(err, runstore.ErrConflict) {
			return err
		}
	}
	fact := cpFact{V: 1, Token: x.Token, Settle: settle, Generation: 1, Holder: h, Ts: ts, AnswerID: answerID}
	if _, err := publishCreateOnly(ctx, d.cfg.JS, CPFactSubject(d.cfg.Space, ep, x.Token), fact); err != nil {
		var api *jetstream.APIError
		if errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil // settled before: the fact stands as first written
		}
		return fmt.Errorf("checkpoint %s settle fact: %w", x.Token, err)
	}
	return nil
}

// publishCreateOnly publishes v on subject only if the subject holds nothing yet.
func publishCreateOnly(ctx context.Context, js jetstream.JetStream, subject string, v any) (*jetstream.PubAck, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{}}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return js.PublishMsg(ctx, msg)
}
