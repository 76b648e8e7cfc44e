package rundriver

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/runstore"
)

// A race's loser that is waiting in an effect (a checkpoint of an hour) is withdrawn
// when the winner settles: its step is settled cancelled, the race records its losers,
// and the run goes on at once rather than when the loser's wait ends. A replay of the
// journal answers the same winner and performs nothing.
func TestRaceLoserInFlightIsWithdrawn(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	defer close(done)
	go func() { // the host clock moves on; the loser's hour would take minutes of it
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(100)
			}
		}
	}()
	prog, run, err := Prepare(`const r = await race({ fast: () => sleep("1s", { name: "fast" }), slow: () => checkpoint("slow", "Wait?", { timeout: "1h" }) });
log("won " + r.index);`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("start: %+v %v", out, err)
	}
	if len(f.logs) != 1 || f.logs[0] != "won fast" {
		t.Fatalf("logged %v", f.logs)
	}
	_, s := f.entries(run, "/race#0/b:slow/checkpoint:slow#0")
	if len(s) != 1 || s[0].Status != "cancelled" {
		t.Fatalf("the loser settled %+v; want once, cancelled", s)
	}
	_, s = f.entries(run, "/race#0")
	var cancel struct {
		Losers []string `json:"losers"`
		Issued bool     `json:"issued"`
	}
	if len(s) != 1 || json.Unmarshal(s[0].Cancel, &cancel) != nil || len(cancel.Losers) != 1 || cancel.Losers[0] != "slow" || !cancel.Issued {
		t.Fatalf("the race settled %+v; want its loser slow recorded", s)
	}
	before := len(f.journal(run))
	f.logs = nil
	out, err = Resume(t.Context(), f.cfg(), run)
	if err == nil || out.State != "" {
		// A completed run is not resumable: the replay is read by a takeover instead.
		t.Fatalf("resume of a completed run: %+v %v", out, err)
	}
	if after := len(f.journal(run)); after != before {
		t.Fatalf("a refused resume appended %d records", after-before)
	}
}

// A driver parked at a checkpoint stops as soon as a resume takes the run over (its
// status watch sees the higher fencing token), with nothing left to append that would
// tell it so; the run's status stays the successor's.
func TestSupersededDriverStopsWhileParked(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const a = await checkpoint("approve", "Ship it?", { timeout: "1h" });
log("approved " + a.value);`)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan Outcome, 1)
	go func() {
		out, _ := Start(t.Context(), f.cfg(), prog, run, "")
		first <- out
	}()
	meshtest.Until(t, "the checkpoint is bound", 10*time.Second, func() bool {
		p, _ := f.entries(run, "/checkpoint:approve#0")
		return len(p) == 2
	})
	go func() { _, _ = Resume(t.Context(), f.cfg(), run) }()
	var a Outcome
	select {
	case a = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the superseded driver still waits at its checkpoint")
	}
	if a.State != runstore.StateReleased || !errors.Is(a.Err, runstore.ErrSuperseded) {
		t.Fatalf("first driver: %+v", a)
	}
	var st runstore.RunStatus
	recs, _ := runstore.OpenRecords(t.Context(), f.js, space)
	if _, err := recs.Get(t.Context(), runstore.RunStatusKey("manager", run), &st); err != nil || st.Epoch != 2 || st.State != runstore.StateRunning {
		t.Fatalf("status %+v %v; want the successor's, running", st, err)
	}
}

// A wait whose event never comes resolves null at its one deadline, bound before it
// waits: killed at its settle and resumed, it resolves at the same time, once.
func TestWaitTimeoutAcrossAKill(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(500)
			}
		}
	}()
	run := f.startKilled(`const r = await wait(replied({ agent: "nobody" }), { name: "reply", timeout: "10s" });
log(r === null ? "none" : "some");`, "/wait:reply#0")
	p, _ := f.entries(run, "/wait:reply#0")
	out, err := Resume(t.Context(), f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v %v", out, err)
	}
	p2, s := f.entries(run, "/wait:reply#0")
	var x seatExternal
	if len(s) != 1 || len(p2) != len(p) || json.Unmarshal(p[len(p)-1].External, &x) != nil || *s[0].EndedAt != x.Deadline || string(s[0].Result) != "null" {
		t.Fatalf("the wait settled %+v (pending %d then %d); want once, null, at its bound deadline", s, len(p), len(p2))
	}
	if f.logs[len(f.logs)-1] != "none" {
		t.Fatalf("logged %v", f.logs)
	}
}
