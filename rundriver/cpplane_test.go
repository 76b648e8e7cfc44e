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
