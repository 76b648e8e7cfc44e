package rundriver

import (
	"context"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/runstore"
)

// A parallel scope, a race and an escalated checkpoint that expires twice and proceeds:
// the run completes, and a second driver replaying the whole journal (a takeover of a
// run released at its last step) performs nothing again and reaches the same values.
func TestScopesAndExpiryReplay(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				f.clock.Add(500)
			}
		}
	}()
	src := `const both = await parallel([() => sleep("1s"), () => sleep("2s")]);
const first = await race({ short: () => sleep("1s", { name: "short" }), long: () => sleep("60s", { name: "long" }) });
const ok = await checkpoint("approve", "Ship?", { timeout: "2s", onExpiry: "escalate", to: "lead" });
log(first.index + " " + ok.status);`
	prog, run, err := Prepare(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := Start(ctx, f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("start: %+v %v", out, err)
	}
	before := len(f.journal(run))
	if p, s := f.entries(run, "/checkpoint:approve#0"); len(s) != 1 || len(p) != 4 || *p[2].Attempt != 1 {
		t.Fatalf("checkpoint journaled %d pending (want begin, bind, reissue, bind), %d settled", len(p), len(s))
	}
	// Replay the completed journal under a new driver: the whole program answers from it.
	f.mu.Lock()
	f.logs = nil
	f.mu.Unlock()
	recs, err := runstore.OpenRecords(t.Context(), f.js, space)
	if err != nil {
		t.Fatal(err)
	}
	var spec runstore.RunSpec
	if _, err := recs.Get(t.Context(), runstore.RunSpecKey("manager", run), &spec); err != nil {
		t.Fatal(err)
	}
	prefix, ap, err := runstore.Activate(t.Context(), f.js, space, run, runstore.Lease{Holder: "replayer", FencingToken: 9, Epoch: 9}, false, f.clock.Load)
	if err != nil {
		t.Fatal(err)
	}
	d := newDrive(f.cfg(), recs, ap, run, runstore.Lease{Holder: "replayer", FencingToken: 9, Epoch: 9}, spec, prefix)
	out, err = d.drive(ctx, prog)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("replay: %+v %v", out, err)
	}
	if after := len(f.journal(run)); after != before+1 {
		t.Fatalf("the replay appended %d records; want its activation only", after-before)
	}
	if len(f.logs) != 1 || f.logs[0] != "short expired" {
		t.Fatalf("replay logged %v", f.logs)
	}
}
