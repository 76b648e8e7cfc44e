package runstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
)

const space = "wf"

func provisioned(t testing.TB) jetstream.JetStream {
	t.Helper()
	js := meshtest.JetStream(t)
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	return js
}

func clock() func() int64 {
	var n atomic.Int64
	n.Store(1_764_720_000_000)
	return func() int64 { return n.Add(1) }
}

func entry(run string, seq int64, kind, state string) runstore.Entry {
	return runstore.Entry{V: 1, Seq: seq, Run: run, Kind: kind, InputHash: "sha256:00", State: state, StartedAt: 1}
}

// A started run's journal is an activation then contiguous steps, and a resume replays it
// all and activates behind it.
func TestActivateAppendReplay(t *testing.T) {
	js := provisioned(t)
	ctx, now := t.Context(), clock()
	run := runstore.NewRunID()
	prefix, ap, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "a", FencingToken: 1, Epoch: 1}, true, now)
	if err != nil || len(prefix) != 0 {
		t.Fatalf("activate: %v %v", prefix, err)
	}
	for i, st := range []string{"pending", "settled"} {
		if n, err := ap.Append(ctx, entry(run, 0, "sleep", st)); err != nil || n != int64(i+1) {
			t.Fatalf("append %d: n %d, %v", i, n, err)
		}
	}
	if _, _, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "a", FencingToken: 1, Epoch: 1}, true, now); !errors.Is(err, runstore.ErrAlreadyStarted) {
		t.Fatalf("a second start: %v, want ErrAlreadyStarted", err)
	}
	if _, _, err := runstore.Activate(ctx, js, space, runstore.NewRunID(), runstore.Lease{Holder: "a", FencingToken: 1, Epoch: 1}, false, now); !errors.Is(err, runstore.ErrNotResumable) {
		t.Fatalf("resume of an empty journal: %v, want ErrNotResumable", err)
	}
	recs, last, err := runstore.Replay(ctx, js, space, run)
	if err != nil || len(recs) != 3 || recs[2].Entry.State != "settled" || last != recs[2].Seq {
		t.Fatalf("replay %+v last %d: %v", recs, last, err)
	}
	prefix, ap2, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "b", FencingToken: 2, Epoch: 2}, false, now)
	if err != nil || len(prefix) != 3 || ap2.High() != 3 {
		t.Fatalf("resume: %d records, %v", len(prefix), err)
	}
	// The first driver is superseded: the stream refuses it, and it stays refused.
	if _, err := ap.Append(ctx, entry(run, 1, "sleep", "pending")); !errors.Is(err, runstore.ErrSuperseded) {
		t.Fatalf("superseded append: %v", err)
	}
	if _, err := ap2.Append(ctx, entry(run, 1, "sleep", "pending")); err != nil {
		t.Fatal(err)
	}
	if _, err := ap.Append(ctx, entry(run, 1, "log", "pending")); !errors.Is(err, runstore.ErrSuperseded) {
		t.Fatalf("poisoned append: %v", err)
	}
	// Lease order against the journal's last activation.
	if _, _, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "c", FencingToken: 1, Epoch: 9}, false, now); !errors.Is(err, runstore.ErrStaleLease) {
		t.Fatalf("stale token: %v", err)
	}
	if _, _, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "c", FencingToken: 2, Epoch: 2}, false, now); !errors.Is(err, runstore.ErrNotAuthorized) {
		t.Fatalf("token held by another: %v", err)
	}
	recs, _, _ = runstore.Replay(ctx, js, space, run)
	if len(recs) != 5 {
		t.Fatalf("journal holds %d records, want 5", len(recs))
	}
}

// Two drivers take one run over at once, each then appending: whatever the interleaving,
// the journal holds a contiguous chain and only the driver whose activation is last
// appends after it.
func TestTwoDriversRaceOneRun(t *testing.T) {
	js := provisioned(t)
	ctx, now := t.Context(), clock()
	run := runstore.NewRunID()
	if _, _, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "genesis", FencingToken: 1, Epoch: 1}, true, now); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		var wg sync.WaitGroup
		var landed atomic.Int32
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lease := runstore.Lease{Holder: "d" + strconv.Itoa(i), FencingToken: int64(2 + 2*round + i), Epoch: int64(round)}
				_, ap, err := runstore.Activate(ctx, js, space, run, lease, false, now)
				if err != nil {
					errs[i] = err
					return
				}
				for range 3 {
					if _, err := ap.Append(ctx, entry(run, 0, "sleep", "pending")); err != nil {
						errs[i] = err
						return
					}
					landed.Add(1)
				}
			}()
		}
		wg.Wait()
		recs, _, err := runstore.Replay(ctx, js, space, run)
		if err != nil {
			t.Fatalf("round %d: replay: %v", round, err)
		}
		// Every step after the last activation belongs to it: exactly one driver appends there.
		last := 0
		for i, r := range recs {
			if r.Activation != nil {
				last = i
			}
		}
		if tail := len(recs) - 1 - last; tail != 3 {
			t.Fatalf("round %d: %d steps after the last activation, want 3 (errors %v)", round, tail, errs)
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, runstore.ErrSuperseded) && !errors.Is(err, runstore.ErrStaleLease) && !errors.Is(err, runstore.ErrActivationRaced) && !errors.Is(err, runstore.ErrReplayRaced) {
				t.Fatalf("round %d driver %d: %v", round, i, err)
			}
		}
	}
}

// A journal written as the reference writes it (raw nats.go: its subject, its fencing
// header, its JSON) replays through runstore, and a takeover activates behind it.
func TestReadsAReferenceJournal(t *testing.T) {
	js := provisioned(t)
	ctx := t.Context()
	run := "run-3f2a9c1e5b7d40a68e2f1c3b5a7d9e0f"
	subject := "cotal." + space + ".wfj." + run
	raw := []string{
		`{"v":1,"kind":"activation","run":"` + run + `","n":0,"holder":"mgr1.0123456789abcdef","fencingToken":1,"epoch":1,"replayedTo":0,"at":1764720000000}`,
		`{"v":1,"kind":"step","run":"` + run + `","n":1,"at":1764720000100,"entry":{"v":1,"seq":0,"run":"` + run + `","scope":"","kind":"checkpoint","name":"issue","occurrence":0,"inputHash":"sha256:ab","requestId":"tok","attempt":0,"state":"pending","startedAt":1764720000100}}`,
		`{"v":1,"kind":"step","run":"` + run + `","n":2,"at":1764720360000,"entry":{"v":1,"seq":0,"run":"` + run + `","scope":"","kind":"checkpoint","name":"issue","occurrence":0,"inputHash":"sha256:ab","requestId":"tok","attempt":0,"state":"settled","startedAt":1764720000100,"status":"ok","endedAt":1764720360000,"result":{"status":"resolved","value":{"issue":42}}}}`,
	}
	var head uint64
	for _, r := range raw {
		m := &nats.Msg{Subject: subject, Data: []byte(r), Header: nats.Header{}}
		m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(head, 10))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		head = ack.Sequence
	}
	recs, last, err := runstore.Replay(ctx, js, space, run)
	if err != nil || len(recs) != 3 || last != head {
		t.Fatalf("replay: %d records, last %d (head %d): %v", len(recs), last, head, err)
	}
	if e := recs[2].Entry; e.Key() != "/checkpoint:issue#0" || e.Status != "ok" || string(e.Result) != `{"status":"resolved","value":{"issue":42}}` {
		t.Fatalf("settled entry %+v", e)
	}
	_, ap, err := runstore.Activate(ctx, js, space, run, runstore.Lease{Holder: "cli_run_1a2b3c4d", FencingToken: 2, Epoch: 2}, false, clock())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ap.Append(context.Background(), entry(run, 1, "log", "pending")); err != nil || n != 4 {
		t.Fatalf("append behind the reference's records: n %d, %v", n, err)
	}
	// The reference's own writer, still holding head, is refused now.
	m := &nats.Msg{Subject: subject, Data: []byte(raw[2]), Header: nats.Header{}}
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(head, 10))
	if _, err := js.PublishMsg(ctx, m); err == nil {
		t.Fatal("the superseded reference writer appended")
	}
}

// A journal longer than the replay consumer's 1000 unacknowledged records replays whole
// (it failed as "delivered 1000 of 1201" before replay acked as it read).
func TestReplayPastTheAckWindow(t *testing.T) {
	js := provisioned(t)
	run := runstore.NewRunID()
	_, ap, err := runstore.Activate(t.Context(), js, space, run, runstore.Lease{Holder: "a", FencingToken: 1, Epoch: 1}, true, clock())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1200 {
		if _, err := ap.Append(t.Context(), entry(run, int64(i), "sleep", "pending")); err != nil {
			t.Fatal(err)
		}
	}
	recs, _, err := runstore.Replay(t.Context(), js, space, run)
	if err != nil || len(recs) != 1201 {
		t.Fatalf("replay: %d records, %v", len(recs), err)
	}
}
