package runstore_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
)

// A checkpoint a reference driver minted on the checkpoint plane (its cp spec and waiting
// status, written raw as its mint writes them, beside a pending journal entry) is resumed
// by an answer through runstore.Space, as the reference's answer does: the answer record,
// then the status CAS to resumed as the minting holder, then the one-use settle fact on
// EPF. A second answer is refused; a checkpoint past its deadline, or expired, is refused
// before anything is written.
func TestAnswerResumesAPlaneCheckpoint(t *testing.T) {
	js := provisioned(t)
	ctx := t.Context()
	recs, err := runstore.OpenRecords(ctx, js, space)
	if err != nil {
		t.Fatal(err)
	}
	// mint writes a run whose journal holds one pending checkpoint under token, and the
	// plane's records for it with the given status.
	mint := func(run, token, status string) uint64 {
		t.Helper()
		for key, val := range map[string]string{
			runstore.CheckpointSpecKey("manager", token):   `{"v":1,"token":"` + token + `","holder":{"id":"mgr1.0123456789abcdef","lifecycleUid":"u_0123456789abcdef0123"},"mintedAt":1764720000100,"initialDeadline":1764806400100}`,
			runstore.CheckpointStatusKey("manager", token): status,
		} {
			if _, err := recs.KV.Create(ctx, key, []byte(val)); err != nil {
				t.Fatal(err)
			}
		}
		subject := "cotal." + space + ".wfj." + run
		var head uint64
		for _, r := range []string{
			`{"v":1,"kind":"activation","run":"` + run + `","n":0,"holder":"mgr1.0123456789abcdef","fencingToken":1,"epoch":1,"replayedTo":0,"at":1764720000000}`,
			`{"v":1,"kind":"step","run":"` + run + `","n":1,"at":1764720000100,"entry":{"v":1,"seq":0,"run":"` + run + `","scope":"","kind":"checkpoint","name":"approve","occurrence":0,"inputHash":"sha256:ab","requestId":"` + token + `","attempt":0,"state":"pending","startedAt":1764720000100,"external":{"asks":"Ship it?"}}}`,
		} {
			m := &nats.Msg{Subject: subject, Data: []byte(r), Header: nats.Header{}}
			m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(head, 10))
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			head = ack.Sequence
		}
		return head
	}
	const waiting = `{"state":"waiting","deadlineGeneration":1,"deadline":1764806400100,"observedSpecRevision":1}`
	run, token := "run-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "tokAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	head := mint(run, token, waiting)
	now := int64(1764720300000)
	sp := &runstore.Space{JS: js, Name: space, Now: func() int64 { return now }}
	q := runstore.AnswerRequest{Run: run, Step: "/checkpoint:approve#0", Value: json.RawMessage(`"yes"`), By: "alice"}
	f, err := sp.Answer(ctx, q)
	if err != nil || f.Settle != "resumed" || f.Token != token {
		t.Fatalf("answer: %+v, %v", f, err)
	}
	var st runstore.CheckpointStatus
	if _, err := recs.Get(ctx, runstore.CheckpointStatusKey("manager", token), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "resumed" || st.SettledGeneration != 1 || st.SettledHolder == nil || st.SettledHolder.ID != "mgr1.0123456789abcdef" ||
		st.SettledTs == nil || *st.SettledTs != now || st.SettledAnswerID != f.AnswerID {
		t.Fatalf("status %+v", st)
	}
	stream, err := js.Stream(ctx, provision.StreamEPF(space))
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, runstore.SettleSubject(space, "manager", token))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"token":"` + token + `","settle":"resumed","generation":1,"holder":{"id":"mgr1.0123456789abcdef","lifecycleUid":"u_0123456789abcdef0123"},"answerId":"` + f.AnswerID + `","ts":1764720300000}`
	if string(m.Data) != want {
		t.Fatalf("settle fact\n got %s\nwant %s", m.Data, want)
	}
	if _, err := sp.Answer(ctx, runstore.AnswerRequest{Run: run, Step: q.Step, Value: json.RawMessage(`"no"`), By: "bob"}); !errors.Is(err, runstore.ErrSettled) {
		t.Fatalf("a second answer: %v, want ErrSettled", err)
	}

	// The reference's driver settles the step (its result names no answer id); an
	// amendment supersedes the answer the plane's status says it acted on.
	settled := `{"v":1,"kind":"step","run":"` + run + `","n":2,"at":1764720300100,"entry":{"v":1,"seq":0,"run":"` + run + `","scope":"","kind":"checkpoint","name":"approve","occurrence":0,"inputHash":"sha256:ab","requestId":"` + token + `","attempt":0,"state":"settled","startedAt":1764720000100,"status":"ok","endedAt":1764720300100,"result":{"outcome":"resolved","value":"yes","by":"alice","at":1764720300000}}}`
	m2 := &nats.Msg{Subject: "cotal." + space + ".wfj." + run, Data: []byte(settled), Header: nats.Header{}}
	m2.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(head, 10))
	if _, err := js.PublishMsg(ctx, m2); err != nil {
		t.Fatal(err)
	}
	am, err := sp.Amend(ctx, runstore.AnswerRequest{Run: run, Step: q.Step, Value: json.RawMessage(`"yes, and tag it"`), By: "alice"})
	if err != nil || am.Supersedes != f.AnswerID || len(am.AnswerID) != 43 || am.AnswerID == f.AnswerID {
		t.Fatalf("amend: %+v, %v; want it to supersede %s", am, err, f.AnswerID)
	}

	// Past its deadline, and expired: refused, nothing written.
	for i, status := range []string{waiting, `{"state":"expired","deadlineGeneration":1,"deadline":1764806400100,"observedSpecRevision":1,"settledGeneration":1,"settledTs":1764806400100}`} {
		run := "run-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + strconv.Itoa(i)
		token := "tokBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB" + strconv.Itoa(i)
		mint(run, token, status)
		late := &runstore.Space{JS: js, Name: space, Now: func() int64 { return 1764806400100 + int64(1-i) }}
		if _, err := late.Answer(ctx, runstore.AnswerRequest{Run: run, Step: q.Step, Value: json.RawMessage(`"yes"`), By: "alice"}); !errors.Is(err, runstore.ErrSettled) {
			t.Fatalf("case %d: %v, want ErrSettled", i, err)
		}
		if as, err := recs.Answers(ctx, "manager", token); err != nil || len(as) != 0 {
			t.Fatalf("case %d: answers %v %v, want none", i, as, err)
		}
	}
}
