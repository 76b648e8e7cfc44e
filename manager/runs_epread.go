package manager

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// epRunRow is one row of run-ps: the reference's pinned, closed run row (the newer rows'
// startedAt, programHash and revocation stay with cotal run ps --json).
type epRunRow struct {
	RunID       string         `json:"runId"`
	Endpoint    string         `json:"endpoint"`
	State       string         `json:"state,omitempty"`
	Holder      string         `json:"holder,omitempty"`
	Epoch       *int64         `json:"epoch,omitempty"`
	JournalHigh *int64         `json:"journalHigh,omitempty"`
	ForkedFrom  *runstore.Fork `json:"forkedFrom,omitempty"`
}

// epRunStatus is run-status's answer: the run's spec, its status once it has one, and its
// journal rows.
type epRunStatus struct {
	RunID    string                `json:"runId"`
	Endpoint string                `json:"endpoint"`
	Spec     runstore.RunSpec      `json:"spec"`
	Status   *runstore.RunStatus   `json:"status,omitempty"`
	Journal  []runstore.JournalRow `json:"journal"`
}

// epRunAnswer is run-answer's answer: the pause's token, the answer's id and how it
// settles ({state: "filed"} or {state: "resumed"}).
type epRunAnswer struct {
	Token    string            `json:"token"`
	AnswerID string            `json:"answerId"`
	Settle   map[string]string `json:"settle"`
}

// epRunSpace is the run store of the endpoint a request names (the manager's own when it
// names none), or the refusal of a name that is no endpoint.
func (m *Manager) epRunSpace(endpoint *string) (*runstore.Space, error) {
	h := m.runs()
	if h == nil {
		return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "this manager hosts no runs: its run store is not open (see its log)")
	}
	sp := &runstore.Space{JS: h.js, Name: m.Space, Now: func() int64 { return time.Now().UnixMilli() }}
	if endpoint != nil {
		if err := runstore.CheckID("endpoint", *endpoint); err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.endpoint: %v", err)
		}
		sp.Endpoint = *endpoint
	}
	return sp, nil
}

// epRunRead serves run-status and run-ps on the ep rails (the reference's RUN_STATUS and
// RUN_PS): reads of the run records and journals, nothing written.
func (m *Manager) epRunRead(command string, r mgrclient.EPRequest) (any, error) {
	var a struct {
		RunID    *string `json:"runId"`
		Endpoint *string `json:"endpoint"`
	}
	if err := epArgs(r, &a); err != nil {
		return nil, err
	}
	sp, err := m.epRunSpace(a.Endpoint)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	if command == "run-ps" {
		if a.RunID != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "run-ps takes {endpoint?}")
		}
		rows, err := sp.Runs(ctx)
		if err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "%v", err)
		}
		out := make([]epRunRow, 0, len(rows))
		for _, row := range rows {
			if a.Endpoint != nil && row.Endpoint != *a.Endpoint {
				continue
			}
			out = append(out, epRunRow{RunID: row.RunID, Endpoint: row.Endpoint, State: row.State, Holder: row.Holder,
				Epoch: row.Epoch, JournalHigh: row.JournalHigh, ForkedFrom: row.ForkedFrom})
		}
		return out, nil
	}
	if a.RunID == nil {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "run-status takes {runId, endpoint?}")
	}
	if err := runstore.CheckID("run id", *a.RunID); err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.runId: %v", err)
	}
	v, err := sp.View(ctx, *a.RunID)
	if errors.Is(err, runstore.ErrNoRecord) {
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "run %s: no record on endpoint %s", *a.RunID, endpointOf(sp))
	}
	if err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPUnavailable, "run %s: %v", *a.RunID, err)
	}
	return epRunStatus{RunID: v.RunID, Endpoint: v.Endpoint, Spec: v.Spec, Status: v.Status, Journal: v.Journal}, nil
}

func endpointOf(sp *runstore.Space) string {
	if sp.Endpoint == "" {
		return runstore.DefaultEndpoint
	}
	return sp.Endpoint
}

// epRunAnswer serves run-answer on the ep rails (the reference's RUN_ANSWER): it files the
// answer to a run's pending checkpoint. Who answers is the caller the broker verified
// (the subject's principal), never a field of the request: the contract's args have none.
func (m *Manager) epRunAnswer(by protocol.Principal, r mgrclient.EPRequest) (any, error) {
	var a struct {
		RunID    string          `json:"runId"`
		Endpoint *string         `json:"endpoint"`
		StepKey  string          `json:"stepKey"`
		Value    json.RawMessage `json:"value"`
		Artifact *string         `json:"artifact"`
	}
	if err := epArgs(r, &a); err != nil {
		return nil, err
	}
	if a.RunID == "" || a.StepKey == "" {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "run-answer takes {runId, stepKey, endpoint?, value?, artifact?}")
	}
	if err := runstore.CheckID("run id", a.RunID); err != nil {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.runId: %v", err)
	}
	artifact := ""
	if a.Artifact != nil {
		artifact = *a.Artifact
	}
	sp, err := m.epRunSpace(a.Endpoint)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	f, err := sp.Answer(ctx, runstore.AnswerRequest{Run: a.RunID, Step: a.StepKey, Value: a.Value, Artifact: artifact, By: by.String()})
	switch {
	case err == nil:
		return epRunAnswer{Token: f.Token, AnswerID: f.AnswerID, Settle: map[string]string{"state": f.Settle}}, nil
	case errors.Is(err, runstore.ErrNoJournal), errors.Is(err, runstore.ErrNotReached),
		errors.Is(err, runstore.ErrNotCheckpoint), errors.Is(err, runstore.ErrSettled):
		// No open checkpoint at that key, as the reference words it.
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "%v", err)
	case errors.Is(err, runstore.ErrAnswered):
		return nil, mgrclient.EPFail(mgrclient.EPConflict, "%v", err)
	case errors.Is(err, runstore.ErrBadAnswer):
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "%v", err)
	}
	return nil, mgrclient.EPFail(mgrclient.EPInternal, "%v", err)
}
