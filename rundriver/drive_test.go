package rundriver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
)

const space = "wf"

type fixture struct {
	t     *testing.T
	js    jetstream.JetStream
	clock atomic.Int64
	mu    sync.Mutex
	logs  []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, js: js}
	f.clock.Store(1_764_720_000_000)
	return f
}

func (f *fixture) cfg() Config {
	return Config{JS: f.js, Space: space, Clock: f.clock.Load, Log: func(_, line string) {
		f.mu.Lock()
		f.logs = append(f.logs, line)
		f.mu.Unlock()
	}}
}

func (f *fixture) journal(run string) []runstore.Record {
	f.t.Helper()
	recs, _, err := runstore.Replay(f.t.Context(), f.js, space, run)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

// entries counts the journal's entries for key by state.
func (f *fixture) entries(run, key string) (pending, settled []runstore.Entry) {
	for _, r := range f.journal(run) {
		if r.Entry != nil && r.Entry.Key() == key {
			if r.Entry.State == "pending" {
				pending = append(pending, *r.Entry)
			} else {
				settled = append(settled, *r.Entry)
			}
		}
	}
	return pending, settled
}

// startKilled starts prog and kills the driver (cancels its context) right before the
// settle of key is appended, after the effect was performed; it answers the run id.
func (f *fixture) startKilled(source, key string) string {
	f.t.Helper()
	prog, run, err := Prepare(source)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.t.Context())
	defer cancel()
	cfg := f.cfg()
	cfg.BeforeSettle = func(k string) {
		if k == key {
			cancel()
		}
	}
	out, err := Start(ctx, cfg, prog, run, "t.cotal.js")
	if err != nil {
		f.t.Fatalf("start: %v", err)
	}
	if out.State != runstore.StateReleased {
		f.t.Fatalf("killed run ended %s: %v", out.State, out.Err)
	}
	if p, s := f.entries(run, key); len(p) == 0 || len(s) != 0 {
		f.t.Fatalf("%s after the kill: %d pending, %d settled; want pending only", key, len(p), len(s))
	}
	return run
}

func (f *fixture) answer(run, token string, value any) {
	f.t.Helper()
	recs, err := runstore.OpenRecords(f.t.Context(), f.js, space)
	if err != nil {
		f.t.Fatal(err)
	}
	id, err := runstore.AnswerID(token, "alice", value, "")
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := json.Marshal(value)
	a := runstore.Answer{V: 1, Token: token, AnswerID: id, Value: b, By: "alice", At: f.clock.Load()}
	if err := recs.Create(f.t.Context(), runstore.AnswerKey(runstore.DefaultEndpoint, token, id), a); err != nil {
		f.t.Fatal(err)
	}
}

// A sleep killed after it waited and before it settled is not waited again on resume:
// it ends at the deadline its pending entry fixed.
func TestSleepExactlyOnceAcrossAKill(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	go func() { // the host clock moves on while the driver sleeps
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(1000)
			}
		}
	}()
	run := f.startKilled(`await sleep("10s"); log("woke");`, "/sleep#0")
	close(done)
	p, _ := f.entries(run, "/sleep#0")
	out, err := Resume(t.Context(), f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v %v", out, err)
	}
	p2, s := f.entries(run, "/sleep#0")
	if len(p2) != 1 || len(s) != 1 || *s[0].EndedAt != p[0].StartedAt+10_000 {
		t.Fatalf("sleep journaled %d pending, %d settled (ended %v, began %d); want one each, ending 10s after it began", len(p2), len(s), s, p[0].StartedAt)
	}
}

// A checkpoint killed while waiting keeps its token: the answer filed meanwhile reaches
// the resumed run, and the run completes with that value.
func TestCheckpointAnsweredAcrossAKill(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const a = await checkpoint("issue", "Which issue?", { timeout: "1d" });
assert(a.status === "resolved", "not resolved");
log("issue " + a.value.issue);`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan Outcome, 1)
	go func() {
		out, _ := Start(ctx, f.cfg(), prog, run, "")
		ended <- out
	}()
	var token string
	meshtest.Until(t, "the checkpoint is bound", 10*time.Second, func() bool {
		p, _ := f.entries(run, "/checkpoint:issue#0")
		if len(p) == 2 && len(p[1].External) > 0 {
			token = p[1].RequestID
			return true
		}
		return false
	})
	cancel()
	if out := <-ended; out.State != runstore.StateReleased {
		t.Fatalf("killed run: %+v", out)
	}
	f.answer(run, token, map[string]any{"issue": 42})
	out, err := Resume(t.Context(), f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v %v", out, err)
	}
	p, s := f.entries(run, "/checkpoint:issue#0")
	if len(p) != 2 || len(s) != 1 || p[1].RequestID != token {
		t.Fatalf("checkpoint journaled %d pending, %d settled; want the begin and one bind, then one settle", len(p), len(s))
	}
	if got := f.logs[len(f.logs)-1]; got != "issue 42" {
		t.Fatalf("the program logged %q", got)
	}
	// A completed run is not resumed.
	if _, err := Resume(t.Context(), f.cfg(), run); err == nil {
		t.Fatal("resumed a completed run")
	}
}

// A notify killed after it filed its notices and before it settled files nothing more on
// resume: each notice record exists once, at its first revision.
func TestNotifyExactlyOnceAcrossAKill(t *testing.T) {
	f := newFixture(t)
	src := `await notify([{ agent: "alice" }, { agent: "bob" }], { decision: "assign", outcome: "reproduce" });`
	run := f.startKilled(src, "/notify#0")
	recs, _ := runstore.OpenRecords(t.Context(), f.js, space)
	notices := func() map[string]uint64 {
		out := map[string]uint64{}
		lister, err := recs.KV.ListKeysFiltered(t.Context(), "notice.manager."+run+".>")
		if err != nil {
			t.Fatal(err)
		}
		for k := range lister.Keys() {
			e, err := recs.KV.Get(t.Context(), k)
			if err != nil {
				t.Fatal(err)
			}
			out[k] = e.Revision()
		}
		return out
	}
	before := notices()
	if len(before) != 2 {
		t.Fatalf("notices after the kill: %v", before)
	}
	if out, err := Resume(t.Context(), f.cfg(), run); err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v %v", out, err)
	}
	after := notices()
	if len(after) != 2 {
		t.Fatalf("notices after resume: %v", after)
	}
	for k, rev := range before {
		if after[k] != rev {
			t.Fatalf("notice %s rewritten: revision %d then %d", k, rev, after[k])
		}
	}
	if p, s := f.entries(run, "/notify#0"); len(p) != 1 || len(s) != 1 {
		t.Fatalf("notify journaled %d pending, %d settled", len(p), len(s))
	}
}

// An effect that needs a seat is settled refused (L5016) and the run released, held;
// the effects before it are not performed again by a resume.
func TestSeatEffectHoldsTheRun(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`await notify([{ agent: "alice" }], { decision: "assign", outcome: "go" });
const w = await spawn("worker");
log("never");`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateReleased || out.Held == nil || out.Held.Code != "L5016" {
		t.Fatalf("start: %+v %v", out, err)
	}
	out, err = Resume(t.Context(), f.cfg(), run)
	if err != nil || out.State != runstore.StateReleased || out.Held == nil {
		t.Fatalf("resume: %+v %v", out, err)
	}
	if p, s := f.entries(run, "/notify#0"); len(p) != 1 || len(s) != 1 {
		t.Fatalf("notify journaled %d pending, %d settled across a resume", len(p), len(s))
	}
	if _, s := f.entries(run, "/spawn:worker#0"); len(s) != 2 || s[1].Status != "refused" || s[1].Error.Code != "L5016" {
		t.Fatalf("spawn settled %+v", s)
	}
	if len(f.logs) != 0 {
		t.Fatalf("logged %v", f.logs)
	}
}

// A driver waiting at a checkpoint is superseded by a resume: when the answer comes only
// the resumed driver settles it, and the superseded one stops.
func TestSupersededDriverStops(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const a = await checkpoint("approve", "Ship it?");
log("approved " + a.value);`)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan Outcome, 1)
	go func() {
		out, _ := Start(t.Context(), f.cfg(), prog, run, "")
		first <- out
	}()
	var token string
	meshtest.Until(t, "the checkpoint is bound", 10*time.Second, func() bool {
		p, _ := f.entries(run, "/checkpoint:approve#0")
		if len(p) == 2 {
			token = p[1].RequestID
			return true
		}
		return false
	})
	second := make(chan Outcome, 1)
	go func() {
		out, err := Resume(t.Context(), f.cfg(), run)
		if err != nil {
			t.Error(err)
		}
		second <- out
	}()
	meshtest.Until(t, "the resume activates", 10*time.Second, func() bool {
		return runstore.LastActivation(f.journal(run)).Epoch == 2
	})
	f.answer(run, token, "yes")
	a, b := <-first, <-second
	if a.State != runstore.StateReleased || !errors.Is(a.Err, runstore.ErrSuperseded) {
		t.Fatalf("first driver: %+v", a)
	}
	if b.State != runstore.StateCompleted {
		t.Fatalf("second driver: %+v", b)
	}
	if _, s := f.entries(run, "/checkpoint:approve#0"); len(s) != 1 {
		t.Fatalf("%d settles of the checkpoint", len(s))
	}
	var st runstore.RunStatus
	recs, _ := runstore.OpenRecords(t.Context(), f.js, space)
	if _, err := recs.Get(t.Context(), runstore.RunStatusKey("manager", run), &st); err != nil || st.State != runstore.StateCompleted || st.Epoch != 2 {
		t.Fatalf("status %+v %v", st, err)
	}
}

var _ lang.Effects = (*drive)(nil)

// Concurrent resumes of one run never share a fencing token, and the step they all reach
// is settled once: a resume that loses is refused or superseded before it appends.
func TestConcurrentResumes(t *testing.T) {
	f := newFixture(t)
	done := make(chan struct{})
	defer close(done)
	go func() { // the host clock moves on while a driver sleeps
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(100)
			}
		}
	}()
	run := f.startKilled(`await sleep("1s"); log("done");`, "/sleep#0")
	var wg sync.WaitGroup
	outs := make([]Outcome, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = Resume(t.Context(), f.cfg(), run)
		}()
	}
	wg.Wait()
	completed := 0
	for i := range 3 {
		if errs[i] == nil && outs[i].State == runstore.StateCompleted {
			completed++
		}
	}
	if completed == 0 {
		t.Fatalf("no resume completed: %v %v", outs, errs)
	}
	tokens := map[int64]bool{}
	for _, r := range f.journal(run) {
		if a := r.Activation; a != nil {
			if tokens[a.FencingToken] {
				t.Fatalf("two activations under fencing token %d", a.FencingToken)
			}
			tokens[a.FencingToken] = true
		}
	}
	if _, s := f.entries(run, "/sleep#0"); len(s) != 1 {
		t.Fatalf("the sleep settled %d times", len(s))
	}
}
