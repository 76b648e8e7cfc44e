package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/run"
	"github.com/cotal-ai/cotal/runstore"
)

// Runs is what the dashboard reads and answers of the space's workflow runs
// (runstore.Space is one).
type Runs interface {
	Runs(ctx context.Context) ([]runstore.RunRow, error)
	View(ctx context.Context, run string) (runstore.RunView, error)
	Pending(ctx context.Context) ([]runstore.Pause, error)
	Answer(ctx context.Context, q runstore.AnswerRequest) (runstore.Filed, error)
}

// RunsAnswer is the body of POST /api/runs/{id}/answer: the step key and the value, as
// JSON (a bare string needs its quotes), exactly what cotal run answer takes.
type RunsAnswer struct {
	Step  string          `json:"step"`
	Value json.RawMessage `json:"value"`
}

// RunList is the answer of GET /api/runs.
type RunList struct {
	Runs []runstore.RunRow `json:"runs"`
}

// PauseList is the answer of GET /api/runs/pending: the checkpoints waiting for a person.
type PauseList struct {
	Pending []runstore.Pause `json:"pending"`
}

// maxStepKey bounds a step key in an answer.
const maxStepKey = 1024

func (s *Server) runsOr503(w http.ResponseWriter) bool {
	if s.Runs != nil {
		return true
	}
	why := "this dashboard does not read workflow runs"
	if s.RunsErr != "" {
		why += ": " + s.RunsErr
	}
	writeError(w, http.StatusServiceUnavailable, "runs-unavailable", why)
	return false
}

func (s *Server) runList(w http.ResponseWriter, r *http.Request) {
	if !s.runsOr503(w) {
		return
	}
	rows, err := s.Runs.Runs(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, "runs-unreadable", err.Error())
		return
	}
	if rows == nil {
		rows = []runstore.RunRow{}
	}
	writeJSON(w, http.StatusOK, RunList{Runs: rows})
}

func (s *Server) runPending(w http.ResponseWriter, r *http.Request) {
	if !s.runsOr503(w) {
		return
	}
	p, err := s.Runs.Pending(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, "runs-unreadable", err.Error())
		return
	}
	if p == nil {
		p = []runstore.Pause{}
	}
	writeJSON(w, http.StatusOK, PauseList{Pending: p})
}

func (s *Server) runJournal(w http.ResponseWriter, r *http.Request) {
	if !s.runsOr503(w) {
		return
	}
	id := r.PathValue("id")
	if err := runstore.CheckID("run id", id); err != nil {
		writeError(w, http.StatusBadRequest, "bad-run", err.Error())
		return
	}
	v, err := s.Runs.View(r.Context(), id)
	switch {
	case errors.Is(err, runstore.ErrNoRecord):
		writeError(w, http.StatusNotFound, "no-run", "the space has no record of run "+id)
	case err != nil:
		writeError(w, http.StatusBadGateway, "runs-unreadable", err.Error())
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// runAnswer answers a checkpoint as cotal run answer does, with the same checks and the
// same refusals; the answerer is the person this dashboard runs as, never the page's say.
func (s *Server) runAnswer(w http.ResponseWriter, r *http.Request) {
	if !s.runsOr503(w) {
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "bad-content-type", "post a JSON body with Content-Type: application/json")
		return
	}
	id := r.PathValue("id")
	if err := runstore.CheckID("run id", id); err != nil {
		writeError(w, http.StatusBadRequest, "bad-run", err.Error())
		return
	}
	var body RunsAnswer
	dec := json.NewDecoder(io.LimitReader(r.Body, runstore.MaxAnswerValue+maxStepKey+256))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "bad-body", "want {\"step\", \"value\"} with value as JSON: "+err.Error())
		return
	}
	if body.Step == "" || len(body.Step) > maxStepKey {
		writeError(w, http.StatusBadRequest, "bad-step", "name the step (such as /checkpoint:approve#0), at most 1024 bytes")
		return
	}
	if len(body.Value) == 0 {
		writeError(w, http.StatusBadRequest, "bad-value", "give the answer as a JSON value (a bare string needs its quotes)")
		return
	}
	by := s.AnswerBy
	if by == "" {
		by = "web"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	a, err := s.Runs.Answer(ctx, runstore.AnswerRequest{Run: id, Step: body.Step, Value: body.Value, By: by})
	if err != nil {
		status, code := http.StatusBadGateway, "answer-failed"
		switch {
		case errors.Is(err, runstore.ErrNoJournal), errors.Is(err, runstore.ErrNoRecord), errors.Is(err, runstore.ErrNotReached):
			status, code = http.StatusNotFound, "no-step"
		case errors.Is(err, runstore.ErrNotCheckpoint), errors.Is(err, runstore.ErrBadAnswer):
			status, code = http.StatusBadRequest, "bad-answer"
		case errors.Is(err, runstore.ErrSettled), errors.Is(err, runstore.ErrAnswered):
			status, code = http.StatusConflict, "not-waiting"
		}
		reason := err.Error()
		if ref := run.AnswerRefusal(err, id, body.Step); ref != nil {
			reason = ref.Error()
		}
		writeError(w, status, code, reason)
		return
	}
	writeJSON(w, http.StatusOK, run.AnswerReport{Token: a.Token, AnswerID: a.AnswerID, Settle: a.Settle})
}
