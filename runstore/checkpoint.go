package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// Checkpoint plane states (endpoint-checkpoint.ts).
const (
	CheckpointWaiting = "waiting"
	CheckpointResumed = "resumed"
	CheckpointExpired = "expired"
)

// CheckpointHolder is who minted a checkpoint and alone may resume it.
type CheckpointHolder struct {
	ID           string `json:"id"`
	LifecycleUID string `json:"lifecycleUid"`
}

// CheckpointSpec is a checkpoint's spec record (cp.<endpoint>.<token>.spec), written once
// by the driver that minted it.
type CheckpointSpec struct {
	V               int              `json:"v"`
	Token           string           `json:"token"`
	Goal            json.RawMessage  `json:"goal,omitempty"`
	Holder          CheckpointHolder `json:"holder"`
	MintedAt        int64            `json:"mintedAt"`
	InitialDeadline int64            `json:"initialDeadline"`
}

// CheckpointStatus is a checkpoint's status record: the single arbiter of its one
// settlement (resumed by an answer, or expired by its timer), updated by revision CAS.
type CheckpointStatus struct {
	State                string            `json:"state"`
	DeadlineGeneration   int64             `json:"deadlineGeneration"`
	Deadline             int64             `json:"deadline"`
	ObservedSpecRevision int64             `json:"observedSpecRevision"`
	SettledGeneration    int64             `json:"settledGeneration,omitempty"`
	SettledHolder        *CheckpointHolder `json:"settledHolder,omitempty"`
	SettledTs            *int64            `json:"settledTs,omitempty"`
	SettledAnswerID      string            `json:"settledAnswerId,omitempty"`
}

// SettleFact is the one-use settle fact on cotal.<space>.epf.<endpoint>.cp.<token>,
// published create-only after the status settled.
type SettleFact struct {
	V          int               `json:"v"`
	Token      string            `json:"token"`
	Settle     string            `json:"settle"`
	Generation int64             `json:"generation"`
	Holder     *CheckpointHolder `json:"holder,omitempty"`
	AnswerID   string            `json:"answerId,omitempty"`
	Ts         int64             `json:"ts"`
}

// CheckpointSpecKey is the key of a checkpoint's spec record.
func CheckpointSpecKey(endpoint, token string) string {
	return "cp." + endpoint + "." + token + ".spec"
}

// CheckpointStatusKey is the key of a checkpoint's status record.
func CheckpointStatusKey(endpoint, token string) string {
	return "cp." + endpoint + "." + token + ".status"
}

// SettleSubject is the subject of a checkpoint's one-use settle fact.
func SettleSubject(space, endpoint, token string) string {
	return protocol.RunSettleSubject(space, endpoint, token)
}

// planeCheckpoint is a checkpoint minted on the checkpoint plane (by a driver that mints
// one, as the reference's does): its spec, status and the status's revision.
type planeCheckpoint struct {
	spec   CheckpointSpec
	status CheckpointStatus
	rev    uint64
}

// readPlane reads the checkpoint plane's records for token: nil when no driver minted
// one there (cotal's local driver waits for the answer record itself).
func readPlane(ctx context.Context, recs *Records, endpoint, token string) (*planeCheckpoint, error) {
	var p planeCheckpoint
	if _, err := recs.Get(ctx, CheckpointSpecKey(endpoint, token), &p.spec); errors.Is(err, ErrNoRecord) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	rev, err := recs.Get(ctx, CheckpointStatusKey(endpoint, token), &p.status)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s has a spec: %w", token, err)
	}
	if p.spec.Token != token || p.spec.Holder.ID == "" {
		return nil, fmt.Errorf("checkpoint %s: its spec names token %q or no holder", token, p.spec.Token)
	}
	p.rev = rev
	return &p, nil
}

// open refuses a plane checkpoint that is settled or past its deadline at now.
func (p *planeCheckpoint) open(now int64) error {
	if p.status.State != CheckpointWaiting {
		return fmt.Errorf("its checkpoint is %s: %w", p.status.State, ErrSettled)
	}
	if now >= p.status.Deadline {
		return fmt.Errorf("its checkpoint's deadline passed (its timer settles it expired): %w", ErrSettled)
	}
	return nil
}

// present resumes a plane checkpoint with an answer, as its minting holder (resume is
// holder-bound; the answerer rides the answer record's by): the status CAS from waiting
// to resumed is the arbiter, then the one-use settle fact is published create-only.
func (s *Space) present(ctx context.Context, recs *Records, p *planeCheckpoint, answerID string, now int64) error {
	ep, token := s.endpoint(), p.spec.Token
	if err := p.open(now); err != nil {
		return err
	}
	st := p.status
	holder := p.spec.Holder
	st.State, st.SettledGeneration, st.SettledHolder, st.SettledTs, st.SettledAnswerID = CheckpointResumed, st.DeadlineGeneration, &holder, &now, answerID
	if _, err := recs.Update(ctx, CheckpointStatusKey(ep, token), st, p.rev); err != nil {
		if !errors.Is(err, ErrConflict) {
			return err
		}
		// The driver waiting on the checkpoint may have read this answer record first and
		// settled the status itself: then the answer took, and the driver publishes the fact.
		var cur CheckpointStatus
		if _, rerr := recs.Get(ctx, CheckpointStatusKey(ep, token), &cur); rerr == nil &&
			cur.State == CheckpointResumed && cur.SettledAnswerID == answerID {
			return nil
		}
		return fmt.Errorf("checkpoint %s settled meanwhile: %w", token, ErrSettled)
	}
	fact := SettleFact{V: 1, Token: token, Settle: CheckpointResumed, Generation: st.SettledGeneration, Holder: &holder, AnswerID: answerID, Ts: now}
	if err := PublishSettleFact(ctx, s.JS, s.Name, ep, fact); err != nil {
		return fmt.Errorf("checkpoint %s: %w", token, err)
	}
	return nil
}

// PublishSettleFact publishes a checkpoint's one-use settle fact on its subject,
// create-only. When a fact is there already, one recording the same settlement (the same
// token, outcome and answer) is no error: a retry, or the other writer of that settlement
// (the answering command and the run's driver each publish it, and after a takeover the
// driver's holder or generation may differ from the answer's); the first one written
// stands. A fact recording another settlement is ErrSettled.
func PublishSettleFact(ctx context.Context, js jetstream.JetStream, space, endpoint string, fact SettleFact) error {
	b, err := marshal(fact)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: SettleSubject(space, endpoint, fact.Token), Data: b, Header: nats.Header{}}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	_, err = js.PublishMsg(ctx, msg)
	if err == nil {
		return nil
	}
	if !casLoss(err) {
		return fmt.Errorf("settle fact: %w", err)
	}
	got, err := js.Stream(ctx, provision.StreamEPF(space))
	if err != nil {
		return fmt.Errorf("settle fact: %w", err)
	}
	m, err := got.GetLastMsgForSubject(ctx, msg.Subject)
	if err != nil {
		return fmt.Errorf("another settle fact is recorded: %w", ErrSettled)
	}
	var first SettleFact
	if string(m.Data) != string(b) && (json.Unmarshal(m.Data, &first) != nil || !first.sameSettlement(fact)) {
		return fmt.Errorf("another settle fact is recorded: %w", ErrSettled)
	}
	return nil
}

// sameSettlement says whether f and g record one settlement: the same token, settled the
// same way with the same answer (who wrote it, when and under which generation aside).
func (f SettleFact) sameSettlement(g SettleFact) bool {
	return f.Token == g.Token && f.Settle == g.Settle && f.AnswerID == g.AnswerID
}
