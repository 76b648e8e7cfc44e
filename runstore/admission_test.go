package runstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cotal-ai/cotal/internal/jcs"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/provision"
)

// Admissions and revocations are stored as the reference stores them, canonical JSON
// (run-admission.ts): each fixture decodes closed and encodes back to the same bytes.
func TestGoldenAdmissionBothWays(t *testing.T) {
	for file, v := range map[string]any{
		"admission.json":        &Admission{},
		"admission-issued.json": &Admission{},
		"revocation.json":       &Revocation{},
	} {
		b := fixture(t, file)
		if err := strictjson.Decode(b, v); err != nil {
			t.Fatalf("%s: decode: %v", file, err)
		}
		if a, ok := v.(*Admission); ok {
			if err := a.Check(); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
		out, err := jcs.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s re-encoded differs:\n got %s\nwant %s", file, out, b)
		}
	}
}

// A malformed admission is refused before anything is written.
func TestAdmissionCheckRefuses(t *testing.T) {
	var good Admission
	if err := strictjson.Decode(fixture(t, "admission.json"), &good); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(a *Admission){
		"version":         func(a *Admission) { a.Version = 2 },
		"run id":          func(a *Admission) { a.RunID = "run.x" },
		"mode":            func(a *Admission) { a.Ceiling.Publish.Allow.Mode = "some" },
		"empty patterns":  func(a *Admission) { a.Ceiling.Subscribe.Allow.Patterns = nil },
		"none+patterns":   func(a *Admission) { a.Ceiling.Publish.Allow.Patterns = []string{"x"} },
		"no deny":         func(a *Admission) { a.Ceiling.Publish.Deny = nil },
		"operator no why": func(a *Admission) { a.Provenance.Reason = "" },
		"provenance kind": func(a *Admission) { a.Provenance.Kind = "guess" },
		"no caller":       func(a *Admission) { a.Caller.UID = "" },
	} {
		a := good
		a.Ceiling.Subscribe.Allow.Patterns = append([]string(nil), good.Ceiling.Subscribe.Allow.Patterns...)
		bad(&a)
		if err := a.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// An admission is written once (an identical retry is success, another is a conflict),
// stored as canonical JSON; a revocation keeps its first marker.
func TestAdmitAndRevoke(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	adm, err := OpenAdmissions(ctx, js, "main")
	if err != nil {
		t.Fatal(err)
	}
	var a Admission
	if err := strictjson.Decode(fixture(t, "admission.json"), &a); err != nil {
		t.Fatal(err)
	}
	if err := adm.Admit(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := adm.Admit(ctx, a); err != nil {
		t.Fatalf("identical retry: %v", err)
	}
	other := a
	other.AdmittedAt++
	if err := adm.Admit(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("second admission: %v, want ErrConflict", err)
	}
	e, err := adm.KV.Get(ctx, AdmissionKey("manager", a.RunID))
	if err != nil || !bytes.Equal(e.Value(), fixture(t, "admission.json")) {
		t.Fatalf("stored %s, %v", e.Value(), err)
	}
	if rv, err := adm.Revoked(ctx, "manager", a.RunID); rv != nil || err != nil {
		t.Fatalf("revoked before a marker: %v %v", rv, err)
	}
	first := Revocation{Version: 1, RunID: a.RunID, Reason: "wrong repo", By: "alice", RevokedAt: 1764720400000}
	if got, err := adm.Revoke(ctx, "manager", first); err != nil || got != first {
		t.Fatalf("revoke: %+v %v", got, err)
	}
	if got, err := adm.Revoke(ctx, "manager", Revocation{Version: 1, RunID: a.RunID, Reason: "again", By: "bob", RevokedAt: 1764720500000}); err != nil || got != first {
		t.Fatalf("second revoke answered %+v %v, want the first marker", got, err)
	}
	e, err = adm.KV.Get(ctx, RevocationKey("manager", a.RunID))
	if err != nil || !bytes.Equal(e.Value(), fixture(t, "revocation.json")) {
		t.Fatalf("stored marker %s, %v", e.Value(), err)
	}
	// A garbled marker is never an absence.
	if _, err := adm.KV.Put(ctx, RevocationKey("manager", "run-x"), []byte(`{"version":1,"runId":"run-x","extra":1}`)); err != nil {
		t.Fatal(err)
	}
	if rv, err := adm.Revoked(ctx, "manager", "run-x"); err == nil {
		t.Fatalf("a garbled marker read as %v", rv)
	}
}

// A run row carries epoch and journalHigh only when the run has a status, and forkedFrom
// as the reference's {run, step}.
func TestRunRowShape(t *testing.T) {
	b, _ := json.Marshal(RunRow{RunID: "run-a", Endpoint: "manager"})
	if string(b) != `{"runId":"run-a","endpoint":"manager"}` {
		t.Errorf("a run with no status: %s", b)
	}
	zero := int64(0)
	b, _ = json.Marshal(RunRow{RunID: "run-b", Endpoint: "manager", State: "running", Holder: "h", Epoch: &zero, JournalHigh: &zero,
		ForkedFrom: &Fork{Run: "run-a", Step: "/checkpoint:x#0"}})
	if string(b) != `{"runId":"run-b","endpoint":"manager","state":"running","holder":"h","epoch":0,"journalHigh":0,"forkedFrom":{"run":"run-a","step":"/checkpoint:x#0"}}` {
		t.Errorf("a forked run: %s", b)
	}
}
