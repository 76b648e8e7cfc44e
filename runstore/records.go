package runstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/provision"
)

// Run states, as the status record carries them.
const (
	StateRunning   = "running"
	StateReleased  = "released"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// Pins are what a run fixes at its start and a resume reads back (run-record.ts).
type Pins struct {
	Seed            string `json:"seed"`
	StartedAt       int64  `json:"startedAt"` // ms
	YieldEvery      int64  `json:"yieldEvery"`
	StepBudget      int64  `json:"stepBudget"`
	EffectCeiling   int64  `json:"effectCeiling"`
	LanguageVersion string `json:"languageVersion"`
}

// DefaultPins are the reference's pin defaults for a run started at startedAt (ms).
func DefaultPins(run string, startedAt int64) Pins {
	return Pins{Seed: run, StartedAt: startedAt, YieldEvery: 1024, StepBudget: 1_000_000, EffectCeiling: 10_000,
		LanguageVersion: lang.LanguageVersion}
}

// Fork names the run and step a forked run was cut from.
type Fork struct {
	Run  string `json:"run"`
	Step string `json:"step"`
}

// RunSpec is a run's spec record, created once by the driver whose activation won.
type RunSpec struct {
	V          int    `json:"v"`
	Run        string `json:"run"`
	Pins       Pins   `json:"pins"`
	CreatedAt  int64  `json:"createdAt"`
	ForkedFrom *Fork  `json:"forkedFrom,omitempty"`
}

// RunStatus is a run's status record, updated by revision CAS.
type RunStatus struct {
	V                    int    `json:"v"`
	ObservedSpecRevision uint64 `json:"observedSpecRevision"`
	State                string `json:"state"`
	Holder               string `json:"holder"`
	Epoch                int64  `json:"epoch"`
	FencingToken         int64  `json:"fencingToken"`
	JournalHigh          int64  `json:"journalHigh"` // the highest journal ordinal written
	At                   int64  `json:"at"`
}

// Program is a run's recorded source, created once.
type Program struct {
	V      int    `json:"v"`
	Run    string `json:"run"`
	Source string `json:"source"`
	File   string `json:"file,omitempty"`
	At     int64  `json:"at"`
}

// Answer is one answer to a pause (a checkpoint or an ask attempt), created once.
type Answer struct {
	V          int             `json:"v"`
	Token      string          `json:"token"`
	AnswerID   string          `json:"answerId"`
	Value      json.RawMessage `json:"value,omitempty"`
	Artifact   string          `json:"artifact,omitempty"`
	By         string          `json:"by"`
	At         int64           `json:"at"`
	Supersedes string          `json:"supersedes,omitempty"`
}

// AnswerID derives an answer's id from what it says, so a retried answer is the same
// record: base64url of SHA-256 over the canonical {token, by, value, artifact}, an
// absent value or artifact being null.
func AnswerID(token, by string, value any, artifact string) (string, error) {
	var art any
	if artifact != "" {
		art = artifact
	}
	b, err := lang.Canonical(map[string]any{"token": token, "by": by, "value": value, "artifact": art})
	if err != nil {
		return "", fmt.Errorf("answer id: %w", err)
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])[:43], nil
}

// ErrConflict is a create-only record that exists with other content, or a status update
// that lost its revision CAS.
var ErrConflict = errors.New("record conflict")

// ErrNoRecord is a record that does not exist.
var ErrNoRecord = errors.New("no such record")

// Records is the space's records bucket.
type Records struct {
	KV jetstream.KeyValue
}

// OpenRecords binds the records bucket of space; provision.Space makes it.
func OpenRecords(ctx context.Context, js jetstream.JetStream, space string) (*Records, error) {
	kv, err := js.KeyValue(ctx, provision.BucketRecords(space))
	if err != nil {
		return nil, fmt.Errorf("records bucket %s: %w (run `cotal up` to provision it)", provision.BucketRecords(space), err)
	}
	return &Records{KV: kv}, nil
}

// Create writes v at key only if the key has never been written (tombstones included);
// an identical record already there is success, other content is ErrConflict.
func (r *Records) Create(ctx context.Context, key string, v any) error {
	b, err := marshal(v)
	if err != nil {
		return fmt.Errorf("record %s: %w", key, err)
	}
	if _, err := r.KV.Update(ctx, key, b, 0); err == nil {
		return nil
	} else if !casLoss(err) {
		return fmt.Errorf("record %s: %w", key, err)
	}
	e, err := r.KV.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("record %s: %w: it was written before and cannot be read back: %v", key, ErrConflict, err)
	}
	if !bytes.Equal(e.Value(), b) {
		return fmt.Errorf("record %s: %w: another value is recorded", key, ErrConflict)
	}
	return nil
}

// Get reads the record at key into v (decoded closed) and answers its revision.
func (r *Records) Get(ctx context.Context, key string, v any) (uint64, error) {
	e, err := r.KV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, fmt.Errorf("record %s: %w", key, ErrNoRecord)
	}
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", key, err)
	}
	if err := strictjson.Decode(e.Value(), v); err != nil {
		return 0, fmt.Errorf("record %s: %w", key, err)
	}
	return e.Revision(), nil
}

// Update writes v at key if its revision is still rev (0: the key was never written);
// it answers the new revision, or ErrConflict when another writer moved it.
func (r *Records) Update(ctx context.Context, key string, v any, rev uint64) (uint64, error) {
	b, err := marshal(v)
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", key, err)
	}
	n, err := r.KV.Update(ctx, key, b, rev)
	if casLoss(err) {
		return 0, fmt.Errorf("record %s at revision %d: %w", key, rev, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", key, err)
	}
	return n, nil
}

// Answers lists the answers filed for the pause named by token, in store order.
func (r *Records) Answers(ctx context.Context, endpoint, token string) ([]Answer, error) {
	w, err := r.KV.Watch(ctx, AnswerFilter(endpoint, token), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("answers to %s: %w", token, err)
	}
	defer func() { _ = w.Stop() }()
	var out []Answer
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return out, nil
			}
			var a Answer
			if err := strictjson.Decode(e.Value(), &a); err != nil {
				return nil, fmt.Errorf("answer %s: %w", e.Key(), err)
			}
			out = append(out, a)
		}
	}
}

// casLoss reports a JetStream refusal of an expected last sequence (10071) or an
// expected revision (10164).
func casLoss(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == 10164
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
