package rundriver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// admit writes run's admission with a read ceiling of channels, as a local start does.
func admit(t *testing.T, js jetstream.JetStream, run string, channels ...string) {
	t.Helper()
	adm, err := runstore.OpenAdmissions(t.Context(), js, space)
	if err != nil {
		t.Fatal(err)
	}
	caller := runstore.Caller{Owner: protocol.OwnerLocal, Actor: "cli_run_0000aaaa", UID: "u_00000000000000000000"}
	a := runstore.Admission{Version: 1, Space: space, Endpoint: runstore.DefaultEndpoint, RunID: run, InstanceID: strings.Repeat("i", 26),
		Caller: caller,
		Ceiling: runstore.Ceiling{
			Publish:   runstore.ChannelAllow(nil, nil),
			Subscribe: runstore.ChannelAllow(channels, func(ch string) string { return protocol.ChannelFilter(space, ch) }),
		},
		Provenance: runstore.Provenance{Kind: "operator", By: caller.Actor, Reason: "test"}, AdmittedAt: 1}
	if err := adm.Admit(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

// post publishes a chat message from name on channel, as a peer would, and answers its id.
func post(t *testing.T, js jetstream.JetStream, name, channel, text string) string {
	t.Helper()
	id := "m-" + name + "-" + text
	m := protocol.Message{ID: id, TS: 1, Space: space, From: protocol.EndpointRef{ID: strings.Repeat("x", 26), Name: name},
		Channel: channel, Parts: []protocol.Part{{Kind: protocol.PartText, Text: text}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), protocol.ChatSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}, channel), b); err != nil {
		t.Fatal(err)
	}
	return id
}

type driven struct {
	out Outcome
	err error
}

// drive starts prog as run in the background under cfg.
func (f *fixture) driveBG(ctx context.Context, cfg Config, source, run string) <-chan driven {
	f.t.Helper()
	prog, _, err := Prepare(source)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan driven, 1)
	go func() {
		out, err := Start(ctx, cfg, prog, run, "t.cotal.js")
		done <- driven{out, err}
	}()
	return done
}

// parked waits until the wait at key has bound its channel and its consumer exists.
func (f *fixture) parked(js jetstream.JetStream, run, key string) runstore.Entry {
	f.t.Helper()
	var got runstore.Entry
	meshtest.Until(f.t, key+" parks on its consumer", 30*time.Second, func() bool {
		p, s := f.entries(run, key)
		if len(s) > 0 || len(p) == 0 {
			return false
		}
		e := p[len(p)-1]
		if _, ok := readChanExternal(e); !ok {
			return false
		}
		if _, err := js.Consumer(f.t.Context(), protocol.StreamChat(space), waitConsumerName(e.RequestID)); err != nil {
			return false
		}
		got = e
		return true
	})
	return got
}

func (f *fixture) finished(done <-chan driven) Outcome {
	f.t.Helper()
	select {
	case d := <-done:
		if d.err != nil {
			f.t.Fatalf("drive: %v", d.err)
		}
		return d.out
	case <-time.After(60 * time.Second):
		f.t.Fatal("the drive did not end")
	}
	return Outcome{}
}

func (f *fixture) settledResult(run, key string) (runstore.Entry, map[string]any) {
	f.t.Helper()
	_, s := f.entries(run, key)
	if len(s) != 1 {
		f.t.Fatalf("%s: %d settled entries, want 1", key, len(s))
	}
	var v map[string]any
	if len(s[0].Result) > 0 && string(s[0].Result) != "null" {
		if err := json.Unmarshal(s[0].Result, &v); err != nil {
			f.t.Fatal(err)
		}
	}
	return s[0], v
}

func consumerGone(t *testing.T, js jetstream.JetStream, requestID string) {
	t.Helper()
	if _, err := js.Consumer(t.Context(), protocol.StreamChat(space), waitConsumerName(requestID)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the wait's consumer %s is still there (%v)", waitConsumerName(requestID), err)
	}
}

func textOf(v map[string]any) string {
	parts, _ := v["parts"].([]any)
	if len(parts) == 0 {
		return ""
	}
	p, _ := parts[0].(map[string]any)
	s, _ := p["text"].(string)
	return s
}

// A message posted after the wait began settles it with the message itself (the chat
// envelope as JSON); one posted before it began does not; the consumer goes afterwards.
func TestWaitMessageSettlesWithTheMessage(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	post(t, f.js, "ann", "build", "old news, from before the wait")
	done := f.driveBG(t.Context(), f.cfg(), `const m = await wait(message(channel("build")), { name: "hear" });
log(m.from.name + ": " + m.parts[0].text);`, run)
	e := f.parked(f.js, run, "/wait:hear#0")
	if x, _ := readChanExternal(e); x.WaitChannel != "build" || x.ChatSeq != 0 {
		t.Fatalf("the pending wait bound %+v", x)
	}
	id := post(t, f.js, "ann", "build", "the build is green; $(rm -rf /)")
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %s: %v", out.State, out.Err)
	}
	s, v := f.settledResult(run, "/wait:hear#0")
	if v["id"] != id || textOf(v) != "the build is green; $(rm -rf /)" || v["channel"] != "build" {
		t.Fatalf("the wait answered %s", s.Result)
	}
	if from, _ := v["from"].(map[string]any); from["name"] != "ann" {
		t.Fatalf("the wait answered %s", s.Result)
	}
	if x, _ := readChanExternal(s); x.ChatSeq == 0 {
		t.Fatalf("the settled wait bound no chat sequence: %s", s.External)
	}
	f.mu.Lock()
	logs := strings.Join(f.logs, "\n")
	f.mu.Unlock()
	if logs != "ann: the build is green; $(rm -rf /)" {
		t.Fatalf("the program logged %q", logs)
	}
	consumerGone(t, f.js, s.RequestID)
}

// from and matches select: the wrong sender, or the right one saying something else,
// does not answer the wait.
func TestWaitMessageFromAndMatches(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	done := f.driveBG(t.Context(), f.cfg(), `const m = await wait(message(channel("build"), { from: "Bob", matches: "^.*ship it" }), { name: "go" });
log(m.parts[0].text);`, run)
	f.parked(f.js, run, "/wait:go#0")
	post(t, f.js, "ann", "build", "ship it")
	post(t, f.js, "bob", "build", "not yet")
	post(t, f.js, "bob", "build", "please ship it now")
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %s: %v", out.State, out.Err)
	}
	if s, v := f.settledResult(run, "/wait:go#0"); textOf(v) != "please ship it now" {
		t.Fatalf("the wait answered %s", s.Result)
	}
}

// A matches pattern not anchored at its start, and a wildcard channel, are refused at
// the call (catchable), and no consumer is made.
func TestWaitMessageRefusesBadEvents(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	prog, _, err := Prepare(`let a = "";
try { await wait(message(channel("build"), { matches: "ship it" }), { name: "loose" }); } catch (e) { a = e.code; }
let b = "";
try { await wait(message(channel("build.*")), { name: "wild" }); } catch (e) { b = e.code; }
log(a + " " + b);`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "t.cotal.js")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run: %+v, %v", out, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.logs, "") != "L4016 L4016" {
		t.Fatalf("logged %q, want both refused L4016", f.logs)
	}
}

// A timeout gives null at the deadline bound before the wait, and the consumer goes.
func TestWaitMessageTimeoutIsNull(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	start := f.clock.Load()
	done := f.driveBG(t.Context(), f.cfg(), `const m = await wait(message(channel("build")), { name: "hear", timeout: "10m" });
log(m === null ? "none" : "some");`, run)
	e := f.parked(f.js, run, "/wait:hear#0")
	f.clock.Add(11 * 60_000)
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %s: %v", out.State, out.Err)
	}
	s, v := f.settledResult(run, "/wait:hear#0")
	if v != nil || string(s.Result) != "null" || s.EndedAt == nil || *s.EndedAt != start+10*60_000 {
		t.Fatalf("the timed-out wait settled %s at %v", s.Result, s.EndedAt)
	}
	consumerGone(t, f.js, e.RequestID)
}

// A driver killed after the wait matched (bound and acked) and before it settled: the
// resume answers the same message once, from the bound sequence, and no consumer is
// left behind.
func TestWaitMessageExactlyOnceAcrossAKill(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`const m = await wait(message(channel("build")), { name: "hear" }); log(m.id);`)
	if err != nil {
		t.Fatal(err)
	}
	admit(t, f.js, run, "build")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := f.cfg()
	cfg.BeforeSettle = func(k string) {
		if k == "/wait:hear#0" {
			cancel()
		}
	}
	done := make(chan driven, 1)
	go func() {
		out, err := Start(ctx, cfg, prog, run, "t.cotal.js")
		done <- driven{out, err}
	}()
	e := f.parked(f.js, run, "/wait:hear#0")
	id := post(t, f.js, "ann", "build", "first")
	if out := f.finished(done); out.State != runstore.StateReleased {
		t.Fatalf("the killed run ended %s: %v", out.State, out.Err)
	}
	p, s := f.entries(run, "/wait:hear#0")
	if len(s) != 0 {
		t.Fatal("the wait settled before the kill")
	}
	if x, _ := readChanExternal(p[len(p)-1]); x.ChatSeq == 0 {
		t.Fatalf("the killed wait bound no sequence: %s", p[len(p)-1].External)
	}
	post(t, f.js, "ann", "build", "second")
	rctx, rcancel := context.WithTimeout(t.Context(), time.Minute)
	defer rcancel()
	out, err := Resume(rctx, f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v, %v", out, err)
	}
	if st, v := f.settledResult(run, "/wait:hear#0"); v["id"] != id {
		t.Fatalf("the resumed wait answered %s, want the message it matched (%s)", st.Result, id)
	}
	f.mu.Lock()
	logs := strings.Join(f.logs, ",")
	f.mu.Unlock()
	if logs != id {
		t.Fatalf("the program logged %q, want %q once", logs, id)
	}
	consumerGone(t, f.js, e.RequestID)
}

// A driver stopped while the wait is parked keeps the consumer: a message posted while no
// driver runs answers the resumed wait.
func TestWaitMessageSeesWhatWasPostedWhileDown(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := f.driveBG(ctx, f.cfg(), `const m = await wait(message(channel("build")), { name: "hear" }); log(m.id);`, run)
	e := f.parked(f.js, run, "/wait:hear#0")
	cancel()
	if out := f.finished(done); out.State != runstore.StateReleased {
		t.Fatalf("the stopped run ended %s: %v", out.State, out.Err)
	}
	if _, err := f.js.Consumer(t.Context(), protocol.StreamChat(space), waitConsumerName(e.RequestID)); err != nil {
		t.Fatalf("the stopped wait's consumer is gone: %v", err)
	}
	id := post(t, f.js, "ann", "build", "landed while the host was down")
	rctx, rcancel := context.WithTimeout(t.Context(), time.Minute)
	defer rcancel()
	out, err := Resume(rctx, f.cfg(), run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v, %v", out, err)
	}
	if st, v := f.settledResult(run, "/wait:hear#0"); v["id"] != id {
		t.Fatalf("the resumed wait answered %s", st.Result)
	}
	consumerGone(t, f.js, e.RequestID)
}

// A wait on a run with no admission, on a channel its admission does not cover, or on a
// revoked run is refused permission-denied (catchable); no consumer is made.
func TestWaitMessageNeedsTheAdmission(t *testing.T) {
	f := newFixture(t)
	source := `let k = "";
try { await wait(message(channel("build")), { name: "hear" }); } catch (e) { k = e.kind; }
log(k);`
	cases := map[string]func(run string){
		"none":  func(string) {},
		"other": func(run string) { admit(t, f.js, run, "random") },
		"revoked": func(run string) {
			admit(t, f.js, run, "build")
			adm, err := runstore.OpenAdmissions(t.Context(), f.js, space)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := adm.Revoke(t.Context(), runstore.DefaultEndpoint, runstore.Revocation{Version: 1, RunID: run, By: "op", Reason: "test", RevokedAt: 1}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			f.mu.Lock()
			f.logs = nil
			f.mu.Unlock()
			prog, run, err := Prepare(source)
			if err != nil {
				t.Fatal(err)
			}
			setup(run)
			out, err := Start(t.Context(), f.cfg(), prog, run, "t.cotal.js")
			if err != nil || out.State != runstore.StateCompleted {
				t.Fatalf("run: %+v, %v", out, err)
			}
			f.mu.Lock()
			logs := strings.Join(f.logs, "")
			f.mu.Unlock()
			if logs != "permission-denied" {
				t.Fatalf("logged %q, want permission-denied", logs)
			}
			_, s := f.entries(run, "/wait:hear#0")
			if len(s) != 1 || s[0].Status != "failed" {
				t.Fatalf("the wait settled %+v", s)
			}
			consumerGone(t, f.js, s[0].RequestID)
		})
	}
}

// idle settles once the channel has been quiet for its window; any message restarts
// the window.
func TestWaitIdle(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	var reads atomic.Int64
	cfg := f.cfg()
	cfg.Clock = func() int64 { reads.Add(1); return f.clock.Load() }
	t0 := f.clock.Load()
	done := f.driveBG(t.Context(), cfg, `const q = await wait(idle(channel("build"), "30s"), { name: "quiet" }); log(q.channel);`, run)
	e := f.parked(f.js, run, "/wait:quiet#0")
	f.clock.Add(20_000)
	post(t, f.js, "ann", "build", "still working")
	// The message is taken (acked) once the window restarted from t0+20s.
	meshtest.Until(t, "the message is taken", 30*time.Second, func() bool {
		c, err := f.js.Consumer(t.Context(), protocol.StreamChat(space), waitConsumerName(e.RequestID))
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		return err == nil && info.AckFloor.Consumer >= 1
	})
	f.clock.Add(20_000) // t0+40s: past the first window, inside the restarted one
	seen := reads.Load()
	meshtest.Until(t, "the driver looks again", 30*time.Second, func() bool { return reads.Load() >= seen+3 })
	if _, s := f.entries(run, "/wait:quiet#0"); len(s) != 0 {
		t.Fatalf("the idle wait settled inside its restarted window: %s", s[0].Result)
	}
	f.clock.Add(20_000) // t0+60s: quiet for 40s since the message
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %s: %v", out.State, out.Err)
	}
	s, v := f.settledResult(run, "/wait:quiet#0")
	if v["channel"] != "build" || v["at"] != float64(t0+60_000) {
		t.Fatalf("the idle wait answered %s", s.Result)
	}
	consumerGone(t, f.js, e.RequestID)
}

// monitor registers interest: its entry binds the handle and settles ok with null; a
// value that is not a handle is refused.
func TestMonitor(t *testing.T) {
	f := newFixture(t)
	prog, run, err := Prepare(`await monitor({ agent: "builder", persona: "dev" }, { name: "watch" });
let k = "";
try { await monitor({ agent: "not a handle" }, { name: "bad" }); } catch (e) { k = e.code; }
log(k);`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "t.cotal.js")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run: %+v, %v", out, err)
	}
	s, _ := f.settledResult(run, "/monitor:watch#0")
	if s.Status != "ok" || string(s.Result) != "null" || string(s.External) != `{"agent":"builder"}` {
		t.Fatalf("monitor settled %s %s, bound %s", s.Status, s.Result, s.External)
	}
	if _, bad := f.entries(run, "/monitor:bad#0"); len(bad) != 1 || bad[0].Status != "failed" {
		t.Fatalf("a monitor of a non-handle settled %+v", bad)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.logs, "") != "L4016" {
		t.Fatalf("logged %q", f.logs)
	}
}

// A channel wait on a race's losing branch is withdrawn: its step settles cancelled and
// its consumer goes, while the run goes on.
func TestWaitMessageLosingARace(t *testing.T) {
	f := newFixture(t)
	run := runstore.NewRunID()
	admit(t, f.js, run, "build")
	done := f.driveBG(t.Context(), f.cfg(), `const r = await race({
  heard: () => wait(message(channel("build")), { name: "hear" }),
  late: () => sleep("1m", { name: "late" }),
}, { name: "first" });
log(r.index);`, run)
	e := f.parked(f.js, run, "/race:first#0/b:heard/wait:hear#0")
	f.clock.Add(2 * 60_000)
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %s: %v", out.State, out.Err)
	}
	if _, s := f.entries(run, "/race:first#0/b:heard/wait:hear#0"); len(s) != 1 || s[0].Status != "cancelled" {
		t.Fatalf("the losing wait settled %+v", s)
	}
	f.mu.Lock()
	logs := strings.Join(f.logs, "")
	f.mu.Unlock()
	if logs != "late" {
		t.Fatalf("logged %q", logs)
	}
	consumerGone(t, f.js, e.RequestID)
}

// The wait's consumer is the reference's: wfw_<requestId> on CHAT_<s>, the channel from
// any sender, explicit ack, deliver new. Its bound external is Go's shape
// (testdata/wait-external.json, documented in docs/interop.md), read and written both ways.
func TestWaitConsumerAndExternalShapes(t *testing.T) {
	const rid = "AbC-_0123456789012345678901234567890123456"
	b, err := json.Marshal(waitConsumerConfig("wf", rid, "build"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"durable_name": "wfw_" + rid, "filter_subject": "cotal.wf.chat.*.*.build",
		"ack_policy": "explicit", "deliver_policy": "new"} {
		if cfg[k] != want {
			t.Errorf("consumer %s = %v, want %v", k, cfg[k], want)
		}
	}
	if _, ok := cfg["inactive_threshold"]; ok {
		t.Error("the wait's consumer must not be reaped while its host is down")
	}
	golden, err := os.ReadFile("testdata/wait-external.json")
	if err != nil {
		t.Fatal(err)
	}
	x, ok := readChanExternal(runstore.Entry{External: bytes.TrimSpace(golden)})
	if !ok || x != (chanExternal{WaitChannel: "build", Since: 1764720000000, Deadline: 1764723600000, ChatSeq: 42}) {
		t.Fatalf("the golden external reads %+v", x)
	}
	out, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(bytes.TrimSpace(golden)) {
		t.Fatalf("the external writes %s, want %s", out, golden)
	}
}
