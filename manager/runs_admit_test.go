package manager_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/workspace"
)

// A run started on the manager is admitted before it is driven, as the reference's host
// admits it: one create-only admission record for the caller that asked (its lifecycle
// uid), under no channel, with the operator's provenance and the manager's instance. A
// revoked run is not resumed by the manager, and a manager starting leaves it parked.
func TestEPRunStartAdmitsAndARevokedRunIsNotResumed(t *testing.T) {
	rr := newRunRig(t)
	const uid = "opcaller00000000000000000000"
	c := &mgrclient.EPCaller{NC: dial(t, rr.url), Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, UID: uid}
	var started struct {
		RunID string `json:"runId"`
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": `await checkpoint("go", "Go?");`}}, &started); err != nil {
		t.Fatalf("run-start: %v", err)
	}
	run := started.RunID
	adm, err := runstore.OpenAdmissions(t.Context(), rr.js, space)
	if err != nil {
		t.Fatal(err)
	}
	var a runstore.Admission
	e, err := adm.KV.Get(t.Context(), runstore.AdmissionKey(runstore.DefaultEndpoint, run))
	if err != nil {
		t.Fatalf("the run's admission: %v", err)
	}
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		t.Fatal(err)
	}
	if a.Caller != (runstore.Caller{Owner: "local", Actor: "root", UID: uid}) || a.Provenance.Kind != "operator" || a.Provenance.By != "local.root" ||
		a.Ceiling.Publish.Allow.Mode != runstore.AllowNone || a.Ceiling.Subscribe.Allow.Mode != runstore.AllowNone ||
		a.InstanceID == "" || a.Endpoint != runstore.DefaultEndpoint || a.Space != space {
		t.Fatalf("admission %+v; want the caller's, operator provenance, no channel", a)
	}

	// Revoked, then stopped here: neither a resume nor the next manager drives it on.
	meshtest.Until(t, "the run waits at its checkpoint", 30*time.Second, func() bool {
		p, _ := rr.entries(run, "/checkpoint:go#0")
		return len(p) == 2
	})
	if _, err := adm.Revoke(t.Context(), runstore.DefaultEndpoint, runstore.Revocation{Version: 1, RunID: run, Reason: "wrong repo", By: "alice", RevokedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	rr.m.StopRun(run)
	rr.wait(run)
	var me *mgrclient.Error
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-resume", Args: map[string]any{"runId": run}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPPermissionDenied || !strings.Contains(me.Message, "revoked by alice (wrong repo)") {
		t.Fatalf("run-resume of a revoked run: %v; want permission-denied naming the revocation", err)
	}
	rr.stop()
	<-rr.done
	rr.start()
	if _, err := rr.m.WaitRun(t.Context(), run); err == nil || !strings.Contains(err.Error(), "not driven by this manager") {
		t.Fatalf("the next manager took the revoked run back: %v", err)
	}
	journal, _, err := runstore.Replay(t.Context(), rr.js, space, run)
	if err != nil {
		t.Fatal(err)
	}
	if a := runstore.LastActivation(journal); a == nil || a.Epoch != 1 {
		t.Fatalf("the revoked run was activated again: %+v", a)
	}
}

// A seat's yield is recorded (yield.<endpoint>.<goalId>) before its turn ends; a yield
// of a goal whose record is there already (a retry whose first write landed unanswered)
// ends the turn as the record says.
func TestTurnYieldKeepsTheRecordedYield(t *testing.T) {
	rr := newRunRig(t)
	if err := rr.proj.WritePersona(&workspace.Persona{Name: "idle", Agent: "claude", Prompt: "You idle."}); err != nil {
		t.Fatal(err)
	}
	run, err := rr.m.StartRun(`const w = await spawn("idle");
const t = await turn(w, { name: "t", deadline: "1h" });
log(t.status + " " + t.note);`, "")
	if err != nil {
		t.Fatal(err)
	}
	var goal string
	meshtest.Until(t, "the turn is handed", 60*time.Second, func() bool {
		p, _ := rr.entries(run, "/turn:t#0")
		if len(p) == 2 {
			goal = p[1].RequestID
			return true
		}
		return false
	})
	seat := rr.seatsOf(run)[0].Name
	recs, err := runstore.OpenRecords(t.Context(), rr.js, space)
	if err != nil {
		t.Fatal(err)
	}
	landed := map[string]any{"v": 1, "goalId": goal, "run": run, "step": "/turn:t#0", "by": "local." + seat, "status": "blocked", "note": "first write", "at": 1}
	if err := recs.Create(t.Context(), "yield.manager."+goal, landed); err != nil {
		t.Fatal(err)
	}
	own := &mgrclient.Client{NC: dial(t, rr.url), Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: seat}}
	if _, err := own.TurnYield(t.Context(), mgrclient.TurnYieldArgs{GoalID: goal, Status: "done", Note: "retry"}); err != nil {
		t.Fatalf("the retried yield: %v", err)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %+v", out)
	}
	if _, s := rr.entries(run, "/turn:t#0"); len(s) != 1 || !strings.Contains(string(s[0].Result), `"note":"first write"`) || !strings.Contains(string(s[0].Result), `"status":"blocked"`) {
		t.Fatalf("the turn settled %+v; want the recorded yield", s)
	}
}
