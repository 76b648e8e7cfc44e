package manager_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// run-ps, run-status and run-answer on the reference's ep rails: the reads answer the
// reference's closed shapes, each refusal carries its code and writes nothing, and the
// answer is recorded as the verified caller, whatever the request says about who answers.
func TestEPRunPsStatusAndAnswer(t *testing.T) {
	rr := newRunRig(t)
	root := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	c := &mgrclient.EPCaller{NC: dial(t, rr.url), Space: space, Caller: root, UID: "opcaller00000000000000000000"}
	var started struct {
		RunID string `json:"runId"`
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": `await checkpoint("go", "Go?");`}}, &started); err != nil {
		t.Fatalf("run-start: %v", err)
	}
	run, step := started.RunID, "/checkpoint:go#0"
	meshtest.Until(t, "the checkpoint waits", 30*time.Second, func() bool {
		p, _ := rr.entries(run, step)
		return len(p) == 2
	})
	refused := func(what, code string, cmd mgrclient.EPCall) *mgrclient.Error {
		t.Helper()
		var me *mgrclient.Error
		if _, err := c.Call(t.Context(), cmd, nil); !errors.As(err, &me) || me.Code != code {
			t.Fatalf("%s: %v; want %s", what, err, code)
		}
		return me
	}

	var ps []map[string]json.RawMessage
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-ps", Args: map[string]any{}}, &ps); err != nil || len(ps) != 1 {
		t.Fatalf("run-ps: %v %v", ps, err)
	}
	for k := range ps[0] {
		if !slices.Contains([]string{"runId", "endpoint", "state", "holder", "epoch", "journalHigh", "forkedFrom"}, k) {
			t.Fatalf("run-ps row has %q, which the reference's closed row refuses: %v", k, ps[0])
		}
	}
	if string(ps[0]["runId"]) != `"`+run+`"` || string(ps[0]["state"]) != `"running"` || string(ps[0]["endpoint"]) != `"`+runstore.DefaultEndpoint+`"` {
		t.Fatalf("run-ps row %v", ps[0])
	}
	var none []json.RawMessage
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-ps", Args: map[string]any{"endpoint": "elsewhere"}}, &none); err != nil || len(none) != 0 {
		t.Fatalf("run-ps of another endpoint: %v %v", none, err)
	}

	var st struct {
		RunID    string                `json:"runId"`
		Endpoint string                `json:"endpoint"`
		Spec     json.RawMessage       `json:"spec"`
		Status   *runstore.RunStatus   `json:"status"`
		Journal  []runstore.JournalRow `json:"journal"`
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-status", Args: map[string]any{"runId": run}}, &st); err != nil {
		t.Fatalf("run-status: %v", err)
	}
	last := st.Journal[len(st.Journal)-1]
	if st.RunID != run || st.Status == nil || st.Status.State != runstore.StateRunning || len(st.Spec) < 2 ||
		last.Step != step || last.State != "pending" || last.Asks != "Go?" {
		t.Fatalf("run-status %+v", st)
	}
	refused("run-status of no run", mgrclient.EPNotFound, mgrclient.EPCall{Command: "run-status", Args: map[string]any{"runId": "run-00000000000000000000000000000000"}})
	refused("run-status of a bad id", mgrclient.EPBadRequest, mgrclient.EPCall{Command: "run-status", Args: map[string]any{"runId": "../x"}})

	answer := func(args map[string]any) mgrclient.EPCall {
		return mgrclient.EPCall{Command: "run-answer", Mode: "self", Args: args}
	}
	// The attack: the request names another answerer. The contract's args are closed, so
	// it is refused and nothing is filed; a caller cannot choose who answers.
	refused("run-answer naming by", mgrclient.EPBadRequest, answer(map[string]any{"runId": run, "stepKey": step, "value": "yes", "by": "mallory"}))
	refused("run-answer of a step not reached", mgrclient.EPNotFound, answer(map[string]any{"runId": run, "stepKey": "/checkpoint:nope#0", "value": "yes"}))
	refused("run-answer of no run", mgrclient.EPNotFound, answer(map[string]any{"runId": "run-00000000000000000000000000000000", "stepKey": step, "value": "yes"}))
	refused("run-answer with no value", mgrclient.EPBadRequest, answer(map[string]any{"runId": run, "stepKey": step}))
	refused("run-answer with a control character in its artifact", mgrclient.EPBadRequest, answer(map[string]any{"runId": run, "stepKey": step, "artifact": "sha256:\x1b[2J"}))
	sp := &runstore.Space{JS: rr.js, Name: space}
	if got, err := sp.Answers(t.Context(), run, step); err != nil || len(got) != 0 {
		t.Fatalf("the refused answers filed %+v %v", got, err)
	}

	var filed struct {
		Token    string            `json:"token"`
		AnswerID string            `json:"answerId"`
		Settle   map[string]string `json:"settle"`
	}
	const seen = "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	if _, err := c.Call(t.Context(), answer(map[string]any{"runId": run, "stepKey": step, "value": "yes", "artifact": seen}), &filed); err != nil || filed.Token == "" || filed.AnswerID == "" || filed.Settle["state"] != runstore.CheckpointResumed {
		t.Fatalf("run-answer: %+v %v", filed, err)
	}
	got, err := sp.Answers(t.Context(), run, step)
	if err != nil || len(got) != 1 || got[0].By != root.String() || got[0].AnswerID != filed.AnswerID || string(got[0].Value) != `"yes"` || got[0].Artifact != seen {
		t.Fatalf("the answer filed %+v %v; want one by %s with the artifact", got, err, root)
	}
	if want, _ := runstore.AnswerID(filed.Token, root.String(), "yes", seen); filed.AnswerID != want {
		t.Fatalf("answer id %s, want %s (the reference's derivation over value and artifact)", filed.AnswerID, want)
	}
	// The hosted driver minted the checkpoint on the settle plane, which the answer resumed:
	// a second answer finds no open checkpoint.
	if me := refused("a second run-answer", mgrclient.EPNotFound, answer(map[string]any{"runId": run, "stepKey": step, "value": "no"})); !strings.Contains(me.Message, "settled already") {
		t.Fatalf("a second answer: %v", me)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %+v", out)
	}
	refused("run-answer of a settled step", mgrclient.EPNotFound, answer(map[string]any{"runId": run, "stepKey": step, "value": "no"}))
	if got, _ := sp.Answers(t.Context(), run, step); len(got) != 1 {
		t.Fatalf("answers after the refusals %+v", got)
	}
}
