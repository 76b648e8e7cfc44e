package runstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// firstCall captures a program's first effect call: its key, input hash and request id,
// which a reference driver would have journaled.
type firstCall struct{ call *lang.Call }

var errStop = errors.New("stop")

func (f *firstCall) Perform(_ context.Context, c lang.Call) (lang.Result, error) {
	f.call = &c
	return lang.Result{}, errStop
}
func (f *firstCall) Scope(context.Context, lang.Call, func(context.Context, any) (lang.Result, error)) (lang.Result, error) {
	return lang.Result{}, errStop
}
func (f *firstCall) Log(string, string) {}

// A run a reference driver started (its records and journal written raw, as its writer
// writes them: the run spec, status and program, an activation and a pending checkpoint)
// is answered through runstore.Space, as cotal run answer and the dashboard answer, and
// resumed by cotal's driver to completion: the checkpoint is not minted again under
// another identity, and the answer filed while no driver ran is the one it acts on.
func TestResumesAReferenceRun(t *testing.T) {
	js := provisioned(t)
	ctx := t.Context()
	run := "run-0123456789abcdef0123456789abcdef"
	source := "const a = await checkpoint(\"approve\", \"Ship it?\");\nlog(\"got \" + a.value + \" by \" + a.by);\n"
	prog, err := lang.Compile(source)
	if err != nil {
		t.Fatal(err)
	}
	const startedAt = 1764720000000
	var fc firstCall
	_ = prog.Run(ctx, lang.Options{RunID: run, Seed: run, StartedAt: startedAt, Effects: &fc})
	if fc.call == nil || fc.call.Key != "/checkpoint:approve#0" {
		t.Fatalf("first call %+v", fc.call)
	}
	recs, err := runstore.OpenRecords(ctx, js, space)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := json.Marshal(source)
	for key, val := range map[string]string{
		runstore.RunSpecKey("manager", run):   `{"v":1,"run":"` + run + `","pins":{"seed":"` + run + `","startedAt":1764720000000,"yieldEvery":1024,"stepBudget":1000000,"effectCeiling":10000,"languageVersion":"2"},"createdAt":1764720000001}`,
		runstore.RunStatusKey("manager", run): `{"v":1,"observedSpecRevision":1,"state":"running","holder":"mgr1.0123456789abcdef","epoch":1,"fencingToken":1,"journalHigh":1,"at":1764720000002}`,
		runstore.ProgramKey("manager", run):   `{"v":1,"run":"` + run + `","source":` + string(src) + `,"at":1764720000001}`,
	} {
		if _, err := recs.KV.Create(ctx, key, []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	subject := "cotal." + space + ".wfj." + run
	entry := `{"v":1,"seq":0,"run":"` + run + `","scope":"","kind":"checkpoint","name":"approve","occurrence":0,"inputHash":"` + fc.call.InputHash +
		`","requestId":"` + fc.call.RequestID + `","attempt":0,"state":"pending","startedAt":1764720000100,"external":{"asks":"Ship it?"}}`
	var head uint64
	for _, r := range []string{
		`{"v":1,"kind":"activation","run":"` + run + `","n":0,"holder":"mgr1.0123456789abcdef","fencingToken":1,"epoch":1,"replayedTo":0,"at":1764720000000}`,
		`{"v":1,"kind":"step","run":"` + run + `","n":1,"at":1764720000100,"entry":` + entry + `}`,
	} {
		m := &nats.Msg{Subject: subject, Data: []byte(r), Header: nats.Header{}}
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(head, 10))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		head = ack.Sequence
	}

	sp := &runstore.Space{JS: js, Name: space, Now: func() int64 { return 1764720300000 }}
	pend, err := sp.Pending(ctx)
	if err != nil || len(pend) != 1 || pend[0].Step != "/checkpoint:approve#0" || pend[0].Asks != "Ship it?" || pend[0].Token != fc.call.RequestID {
		t.Fatalf("pending %+v, %v", pend, err)
	}
	if _, err := sp.Answer(ctx, runstore.AnswerRequest{Run: run, Step: "/checkpoint:approve#0", Value: json.RawMessage(`"yes"`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	var logs []string
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := rundriver.Resume(rctx, rundriver.Config{JS: js, Space: space, Log: func(_, l string) { logs = append(logs, l) }}, run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v, %v", out, err)
	}
	if strings.Join(logs, "|") != "got yes by alice" {
		t.Fatalf("logs %q", logs)
	}
	journal, _, err := runstore.Replay(ctx, js, space, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range journal {
		if r.Entry != nil && r.Entry.RequestID != fc.call.RequestID {
			t.Errorf("entry %s under request id %s, want the reference's %s", r.Entry.Key(), r.Entry.RequestID, fc.call.RequestID)
		}
	}
	last := journal[len(journal)-1].Entry
	if last == nil || last.State != "settled" || runstore.Outcome(*last) != "resolved" {
		t.Fatalf("last record %+v", journal[len(journal)-1])
	}
	if a := runstore.LastActivation(journal); a.FencingToken != 2 || a.Epoch != 2 {
		t.Fatalf("takeover under %+v, want token 2 epoch 2", a)
	}
}
