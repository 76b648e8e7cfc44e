package rundriver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
)

// A checkpoint leaves the reference's checkpoint plane: its spec and a waiting status
// once bound, then, settled, its status resumed with the answer's id and one settle fact
// on EPF. The answer here lands while no driver runs (the first was killed waiting), so
// the plane's settle is missing until a resume writes it; a resume killed after that and
// before the journal's settle leaves the next one to write it again, harmlessly: the
// status keeps its first settle and the subject holds one fact.
func TestCheckpointPlaneWrittenIfMissing(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const a = await checkpoint("ship", "Ship?", { timeout: "1h" });
log("ship " + a.value);`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := f.cfg()
	ended := make(chan Outcome, 1)
	go func() {
		out, _ := Start(ctx, cfg, prog, run, "")
		ended <- out
	}()
	var token string
	meshtest.Until(t, "the checkpoint is bound", 10*time.Second, func() bool {
		p, _ := f.entries(run, "/checkpoint:ship#0")
		if len(p) == 2 {
			token = p[1].RequestID
			return true
		}
		return false
	})
	recs, err := runstore.OpenRecords(t.Context(), f.js, space)
	if err != nil {
		t.Fatal(err)
	}
	var spec runstore.CheckpointSpec
	var st runstore.CheckpointStatus
	if _, err := recs.Get(t.Context(), runstore.CheckpointSpecKey("manager", token), &spec); err != nil || spec.Token != token || spec.InitialDeadline != spec.MintedAt+3_600_000 {
		t.Fatalf("cp spec %+v %v", spec, err)
	}
	if _, err := recs.Get(t.Context(), runstore.CheckpointStatusKey("manager", token), &st); err != nil || st.State != "waiting" || st.Deadline != spec.InitialDeadline {
		t.Fatalf("cp status %+v %v", st, err)
	}
	cancel()
	<-ended
	f.answer(run, token, "yes")
	cfg = f.cfg()
	kctx, kill := context.WithCancel(t.Context())
	defer kill()
	cfg.BeforeSettle = func(string) { kill() }
	if out, err := Resume(kctx, cfg, run); err != nil || out.State != runstore.StateReleased {
		t.Fatalf("killed resume: %+v %v", out, err)
	}
	out, err := Resume(t.Context(), f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v %v", out, err)
	}
	if _, err := recs.Get(t.Context(), runstore.CheckpointStatusKey("manager", token), &st); err != nil || st.State != "resumed" || st.SettledAnswerID == "" || st.SettledGeneration != 1 {
		t.Fatalf("cp status after the settle %+v %v", st, err)
	}
	epf, err := f.js.Stream(t.Context(), provision.StreamEPF(space))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := epf.GetLastMsgForSubject(t.Context(), runstore.SettleSubject(space, "manager", token))
	if err != nil {
		t.Fatal(err)
	}
	var fact runstore.SettleFact
	// The resume that settled it holds the run under another holder: it settles as the
	// checkpoint's minting holder, as an answer resumes it, so both write one fact.
	if err := json.Unmarshal(msg.Data, &fact); err != nil || fact.Settle != "resumed" || fact.AnswerID != st.SettledAnswerID || fact.Token != token ||
		fact.Holder == nil || *fact.Holder != spec.Holder || st.SettledHolder == nil || *st.SettledHolder != spec.Holder {
		t.Fatalf("settle fact %s %v", msg.Data, err)
	}
	info, err := epf.Info(t.Context(), jetstream.WithSubjectFilter(runstore.SettleSubject(space, "manager", token)))
	if err != nil || info.State.Subjects[runstore.SettleSubject(space, "manager", token)] != 1 {
		t.Fatalf("settle facts: %+v %v; want one", info.State.Subjects, err)
	}
}

// A checkpoint whose wait ends on its deadline (here the driver's clock) while an answer
// is presented at nearly the same time settles once: the answerer's status CAS comes in
// between the end of the wait and the driver's plane settle, so the answer won the
// checkpoint, and the journal, the status and the one settle fact all say it resumed with
// that answer.
func TestCheckpointSettleRacesAnAnswer(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const c = await checkpoint("go", "Go on?", { timeout: "1m", onExpiry: "proceed" });
log(c.status);`)
	if err != nil {
		t.Fatal(err)
	}
	t0 := f.clock.Load()
	cfg := f.cfg()
	var answered runstore.Filed
	cfg.beforeSettleCP = func(string) {
		sp := &runstore.Space{JS: f.js, Name: space, Now: func() int64 { return t0 + 100 }}
		var err error
		answered, err = sp.Answer(t.Context(), runstore.AnswerRequest{Run: run, Step: "/checkpoint:go#0", Value: json.RawMessage(`{"ok":true}`), By: "alice"})
		if err != nil || answered.Settle != runstore.CheckpointResumed {
			t.Errorf("answer: %+v, %v", answered, err)
		}
	}
	ended := make(chan Outcome, 1)
	go func() {
		out, err := Start(t.Context(), cfg, prog, run, "")
		if err != nil {
			t.Error(err)
		}
		ended <- out
	}()
	var token string
	meshtest.Until(t, "the checkpoint is bound", 10*time.Second, func() bool {
		p, _ := f.entries(run, "/checkpoint:go#0")
		if len(p) == 2 {
			token = p[1].RequestID
			return true
		}
		return false
	})
	f.clock.Store(t0 + 61_000) // the driver's clock passes the deadline, no answer yet seen
	if out := <-ended; out.State != runstore.StateCompleted {
		t.Fatalf("run: %+v", out)
	}
	if len(f.logs) != 1 || f.logs[0] != "resolved" {
		t.Fatalf("the program logged %q; want the answer that won the checkpoint", f.logs)
	}
	_, s := f.entries(run, "/checkpoint:go#0")
	var res map[string]any
	if len(s) != 1 || json.Unmarshal(s[0].Result, &res) != nil || res["outcome"] != "resolved" || res["answerId"] != answered.Answer.AnswerID {
		t.Fatalf("journal settles %+v; want one, resolved with answer %s", s, answered.Answer.AnswerID)
	}
	recs, err := runstore.OpenRecords(t.Context(), f.js, space)
	if err != nil {
		t.Fatal(err)
	}
	var st runstore.CheckpointStatus
	if _, err := recs.Get(t.Context(), runstore.CheckpointStatusKey("manager", token), &st); err != nil || st.State != "resumed" || st.SettledAnswerID != answered.Answer.AnswerID {
		t.Fatalf("cp status %+v %v", st, err)
	}
	epf, err := f.js.Stream(t.Context(), provision.StreamEPF(space))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := epf.GetLastMsgForSubject(t.Context(), runstore.SettleSubject(space, "manager", token))
	if err != nil {
		t.Fatal(err)
	}
	var fact runstore.SettleFact
	if err := json.Unmarshal(msg.Data, &fact); err != nil || fact.Settle != "resumed" || fact.AnswerID != st.SettledAnswerID {
		t.Fatalf("settle fact %s %v; want resumed with the status's answer", msg.Data, err)
	}
}
