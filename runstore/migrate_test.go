package runstore_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

// recorder answers every effect and scope with a plain value and keeps the calls, so a
// journal can be written as a driver that performed them would have.
type recorder struct {
	mu    sync.Mutex
	calls []lang.Call
}

func (r *recorder) add(c lang.Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) Perform(_ context.Context, c lang.Call) (lang.Result, error) {
	r.add(c)
	switch c.Kind {
	case "spawn":
		return lang.Result{Value: map[string]any{"agent": "local.w1", "persona": "worker"}}, nil
	case "turn":
		return lang.Result{Value: map[string]any{"status": "done", "at": float64(1)}}, nil
	}
	return lang.Result{}, nil
}
func (r *recorder) Scope(ctx context.Context, c lang.Call, run func(context.Context, any) (lang.Result, error)) (lang.Result, error) {
	r.add(c)
	return run(ctx, nil)
}
func (r *recorder) Log(string, string) {}

// The migration check classifies each recorded step an edited program no longer reaches
// by kind, as the reference's orphan table does, and never writes: a sleep and a scope are
// ignored, a turn kept, a spawn (L5003) and a notify with no consumed notice (L5013) and an
// unknown kind (L5015) rejected; the steps the edit still reaches are accounted for.
func TestMigrateOrphanTable(t *testing.T) {
	js := provisioned(t)
	ctx, now := t.Context(), clock()
	run := runstore.NewRunID()
	orig := `await sleep("1s");
const w = await spawn("worker", { name: "worker" });
await turn(w, { name: "build" });
await notify([w], { decision: "assign", outcome: "build" });
await parallel([async () => { await sleep("2s", { name: "a" }); }, async () => { await sleep("3s", { name: "b" }); }], { name: "both" });
`
	prog, err := lang.Compile(orig)
	if err != nil {
		t.Fatal(err)
	}
	spec := runstore.RunSpec{V: 1, Run: run, Pins: runstore.DefaultPins(run, 1764720000000), CreatedAt: 1764720000000}
	var rec recorder
	if err := prog.Run(ctx, lang.Options{RunID: run, Seed: spec.Pins.Seed, StartedAt: spec.Pins.StartedAt, Effects: &rec}); err != nil {
		t.Fatal(err)
	}
	_, ap, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "mgr1.0123456789abcdef", FencingToken: 1, Epoch: 1}, true, now)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := runstore.OpenRecords(ctx, js, space)
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(ctx, runstore.RunSpecKey("manager", run), spec); err != nil {
		t.Fatal(err)
	}
	end := int64(1764720000500)
	for i, c := range append(rec.calls, lang.Call{Kind: "teleport", Key: "/teleport#0", InputHash: "sha256:00"}) {
		attempt := 0
		e := runstore.Entry{V: 1, Seq: int64(i), Run: run, Scope: c.Scope, Kind: c.Kind, Name: c.Name, Occurrence: c.Occurrence,
			InputHash: c.InputHash, RequestID: c.RequestID, Attempt: &attempt, State: "pending", StartedAt: 1764720000100}
		if _, err := ap.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.State, e.Status, e.EndedAt, e.Result = "settled", "ok", &end, json.RawMessage("null")
		if c.Kind == "spawn" {
			e.Result = json.RawMessage(`{"agent":"local.w1","persona":"worker"}`)
		}
		if _, err := ap.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	edited, err := lang.Compile("await sleep(\"1s\");\nlog(\"the rest is gone\");\n")
	if err != nil {
		t.Fatal(err)
	}
	sp := &runstore.Space{JS: js, Name: space}
	rep, err := sp.Migrate(ctx, run, edited)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/spawn:worker#0":                "rejected L5003",
		"/turn:build#0":                  "kept ",
		"/notify#0":                      "rejected L5013",
		"/parallel:both#0":               "ignored ",
		"/parallel:both#0/b:0/sleep:a#0": "ignored ",
		"/parallel:both#0/b:1/sleep:b#0": "ignored ",
		"/teleport#0":                    "rejected L5015",
	}
	got := map[string]string{}
	for _, o := range rep.Orphans {
		got[o.Step] = o.Verdict + " " + o.Code
	}
	if len(got) != len(want) {
		t.Errorf("orphans %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("orphan %s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if rep.Admissible || rep.ConsumedThrough != 1 || rep.Divergence != nil {
		t.Fatalf("report %+v", rep)
	}
	// The original program is admissible over its own journal but for the unknown kind.
	rep, err = sp.Migrate(ctx, run, prog)
	if err != nil || rep.ConsumedThrough != len(rec.calls) || len(rep.Orphans) != 1 || rep.Orphans[0].Code != "L5015" {
		t.Fatalf("the original program: %+v, %v", rep, err)
	}
	// Nothing was written: the journal holds what it held.
	after, _, err := runstore.Replay(ctx, js, space, run)
	if err != nil || len(after) != 1+2*(len(rec.calls)+1) {
		t.Fatalf("journal after the checks: %d records, %v", len(after), err)
	}
}
