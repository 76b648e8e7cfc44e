package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// A workflow run's pauses are timed by the delivery daemon: a sleep armed by a driver
// that then stops fires while no driver runs, and the next driver finds it over and
// settles it; a checkpoint's timeout expires by the fire alone. The drivers' own clock is
// frozen at the run's start, so only the timer plane can end either pause. The drivers
// hold the manager's credential: the run host's grants arm and read the timer plane.
func TestRunPauseFiredWhileNoDriverRuns(t *testing.T) {
	p := newTimerPlane(t)
	serve(t, p.m.lane())
	mgr := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}
	js, err := jetstream.New(p.m.Connect(p.m.Mint(space, trust.UserSpec{Name: "manager", Profile: trust.ProfileManager,
		Principal: mgr, LifecycleUID: p.m.uid("manager")})))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UnixMilli()
	cfg := rundriver.Config{JS: js, Space: space, Clock: func() int64 { return t0 }}

	// The sleep leaves the first driver seconds to journal and arm it before it fires.
	prog, run, err := rundriver.Prepare(`await sleep("3s");
const c = await checkpoint("go", "Go on?", { timeout: "2s", onExpiry: "proceed" });
log(c.status);`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := rundriver.Start(ctx, cfg, prog, run, ""); first <- err }()
	// The first driver arms the sleep, then stops before its deadline.
	reqs, err := p.m.js.Stream(t.Context(), "EPT_REQ_"+space)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the sleep's schedule request", deadline, func() bool {
		info, err := reqs.Info(t.Context())
		return err == nil && info.State.Msgs >= 1
	})
	kill()
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first driver: %v", err)
	}
	if pend, settled := entries(t, js, run, "/sleep#0"); len(pend) != 1 || len(settled) != 0 {
		t.Fatalf("after the first driver, /sleep#0 pending %d settled %d; want 1 and 0", len(pend), len(settled))
	}
	// No driver runs: the broker fires the sleep at its deadline all the same.
	fires, err := p.m.js.Stream(t.Context(), "EPT_"+space)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the sleep's fire", deadline, func() bool {
		_, err := fires.GetLastMsgForSubject(t.Context(), protocol.TimerSubject(space, "manager", "*", "*", "*", protocol.TimerFire))
		return err == nil
	})

	rctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	var logs []string
	cfg.Log = func(_, line string) { logs = append(logs, line) }
	out, err := rundriver.Resume(rctx, cfg, run)
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("resume: %+v, %v; want the run completed by the timer plane's fires", out, err)
	}
	if len(logs) != 1 || logs[0] != "expired" {
		t.Fatalf("the program logged %q, want the checkpoint expired", logs)
	}
	_, slept := entries(t, js, run, "/sleep#0")
	_, cp := entries(t, js, run, "/checkpoint:go#0")
	if len(slept) != 1 || len(cp) != 1 {
		t.Fatalf("settles: sleep %d, checkpoint %d; want one each", len(slept), len(cp))
	}
	var res map[string]any
	if err := json.Unmarshal(cp[0].Result, &res); err != nil || res["outcome"] != "expired" {
		t.Fatalf("checkpoint settled %s, want expired", cp[0].Result)
	}
}

func entries(t *testing.T, js jetstream.JetStream, run, key string) (pending, settled []runstore.Entry) {
	t.Helper()
	recs, _, err := runstore.Replay(t.Context(), js, space, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
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

// A wait's timeout is armed on the timer plane too: with the driver's clock frozen, only
// the fire ends the wait, with null.
func TestRunWaitTimeoutFired(t *testing.T) {
	p := newTimerPlane(t)
	serve(t, p.m.lane())
	t0 := time.Now().UnixMilli()
	var logs []string
	cfg := rundriver.Config{JS: p.m.js, Space: space, Clock: func() int64 { return t0 },
		Log: func(_, line string) { logs = append(logs, line) }}
	prog, run, err := rundriver.Prepare(`const r = await wait(replied({ agent: "nobody" }), { name: "reply", timeout: "1s" });
log(r === null ? "timed out" : "replied");`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	out, err := rundriver.Start(ctx, cfg, prog, run, "")
	if err != nil || out.State != runstore.StateCompleted || len(logs) != 1 || logs[0] != "timed out" {
		t.Fatalf("run %+v, %v, logs %q; want completed with the wait timed out", out, err, logs)
	}
}

// An answer filed in time while no driver runs is the checkpoint's outcome, although the
// timer plane's fire is recorded too and the next driver starts after the deadline: the
// resumed driver reads the answers filed before it decides the checkpoint expired.
func TestRunCheckpointAnsweredWhileNoDriverRuns(t *testing.T) {
	p := newTimerPlane(t)
	serve(t, p.m.lane())
	t0 := time.Now().UnixMilli()
	var logs []string
	cfg := rundriver.Config{JS: p.m.js, Space: space, Clock: func() int64 { return t0 },
		Log: func(_, line string) { logs = append(logs, line) }}
	prog, run, err := rundriver.Prepare(`const c = await checkpoint("go", "Go on?", { timeout: "3s", onExpiry: "proceed" });
log(c.status);`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := rundriver.Start(ctx, cfg, prog, run, ""); first <- err }()
	reqs, err := p.m.js.Stream(t.Context(), "EPT_REQ_"+space)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the checkpoint's schedule request", deadline, func() bool {
		info, err := reqs.Info(t.Context())
		return err == nil && info.State.Msgs >= 1
	})
	kill()
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first driver: %v", err)
	}
	sp := &runstore.Space{JS: p.m.js, Name: space, Now: func() int64 { return t0 + 100 }}
	filed, err := sp.Answer(t.Context(), runstore.AnswerRequest{Run: run, Step: "/checkpoint:go#0", Value: json.RawMessage(`{"ok":true}`), By: "alice"})
	if err != nil || filed.Settle != "resumed" {
		t.Fatalf("answer: %+v, %v", filed, err)
	}
	fires, err := p.m.js.Stream(t.Context(), "EPT_"+space)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the checkpoint's fire", deadline, func() bool {
		_, err := fires.GetLastMsgForSubject(t.Context(), protocol.TimerSubject(space, "manager", "*", "*", "*", protocol.TimerFire))
		return err == nil
	})
	// The next driver starts after the deadline, on its clock and the broker's.
	cfg.Clock = func() int64 { return t0 + 10_000 }
	rctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	out, err := rundriver.Resume(rctx, cfg, run)
	if err != nil || out.State != runstore.StateCompleted || len(logs) != 1 || logs[0] != "resolved" {
		t.Fatalf("resume: %+v, %v, logs %q; want completed with the answer filed in time", out, err, logs)
	}
}

// neverSeats is a seat host whose seats never yield and which times no deadline: a turn
// ends only when it is withdrawn or its context ends.
type neverSeats struct {
	mu     sync.Mutex
	goals  map[string]chan struct{}
	handed int
}

func (s *neverSeats) goal(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goals == nil {
		s.goals = map[string]chan struct{}{}
	}
	g, ok := s.goals[id]
	if !ok {
		g = make(chan struct{})
		s.goals[id] = g
	}
	return g
}

func (s *neverSeats) Spawn(_ context.Context, r rundriver.SpawnRequest) (rundriver.Handle, error) {
	return rundriver.Handle{Agent: r.Persona + "-1", Persona: r.Persona}, nil
}

func (s *neverSeats) Turn(ctx context.Context, r rundriver.TurnRequest) (rundriver.TurnResult, error) {
	g := s.goal(r.GoalID)
	s.mu.Lock()
	s.handed++
	s.mu.Unlock()
	select {
	case <-g:
		return rundriver.TurnResult{}, &lang.EffectError{Code: "L4002", Kind: "cancelled", Message: "withdrawn"}
	case <-ctx.Done():
		return rundriver.TurnResult{}, ctx.Err()
	}
}

func (s *neverSeats) Cancel(_, goalID string) {
	g := s.goal(goalID)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

func (s *neverSeats) Down(ctx context.Context, _, _ string) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// A turn's and an ask's deadline are armed on the timer plane, the turn's under its
// request id and the ask attempt's under its token: the driver (the manager) stops
// before the deadline, the broker fires it while no driver runs, and the driver that
// takes the run back finds the fire and settles the step L4003 once, although its own
// clock, frozen at the run's start, never reaches the deadline.
func TestRunTurnAndAskDeadlineFiredWhileNoDriverRuns(t *testing.T) {
	for _, c := range []struct{ name, effect, key string }{
		{"turn", `await turn(w, { name: "build", deadline: "3s" })`, "/turn:build#0"},
		{"ask", `await ask(w, { name: "q", schema: { ok: "boolean" }, deadline: "3s", attempts: 2 })`, "/ask:q#0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTimerPlane(t)
			serve(t, p.m.lane())
			t0 := time.Now().UnixMilli()
			var logs []string
			cfg := rundriver.Config{JS: p.m.js, Space: space, Clock: func() int64 { return t0 }, Seats: &neverSeats{},
				Log: func(_, line string) { logs = append(logs, line) }}
			prog, run, err := rundriver.Prepare(`const w = await spawn("dev");
try { ` + c.effect + `; log("ended"); } catch (e) { log(e.code); }`)
			if err != nil {
				t.Fatal(err)
			}
			ctx, kill := context.WithCancel(t.Context())
			first := make(chan error, 1)
			go func() { _, err := rundriver.Start(ctx, cfg, prog, run, ""); first <- err }()
			reqs, err := p.m.js.Stream(t.Context(), "EPT_REQ_"+space)
			if err != nil {
				t.Fatal(err)
			}
			meshtest.Until(t, "the deadline's schedule request", deadline, func() bool {
				info, err := reqs.Info(t.Context())
				return err == nil && info.State.Msgs >= 1
			})
			kill()
			if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("first driver: %v", err)
			}
			pend, settled := entries(t, p.m.js, run, c.key)
			if len(pend) != 2 || len(settled) != 0 {
				t.Fatalf("after the first driver, %s pending %d settled %d; want the begin and its bind, no settle", c.key, len(pend), len(settled))
			}
			var x struct {
				Token string `json:"token"`
			}
			if err := json.Unmarshal(pend[1].External, &x); err != nil || x.Token != pend[1].RequestID {
				t.Fatalf("bound %s, %v; want the request id as the first goal's token", pend[1].External, err)
			}
			fires, err := p.m.js.Stream(t.Context(), "EPT_"+space)
			if err != nil {
				t.Fatal(err)
			}
			meshtest.Until(t, "the deadline's fire", deadline, func() bool {
				_, err := fires.GetLastMsgForSubject(t.Context(), protocol.TimerSubject(space, "manager", "*", "*", x.Token, protocol.TimerFire))
				return err == nil
			})

			seats := &neverSeats{}
			cfg.Seats = seats
			rctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			out, err := rundriver.Resume(rctx, cfg, run)
			if err != nil || out.State != runstore.StateCompleted || len(logs) != 1 || logs[0] != "L4003" {
				t.Fatalf("resume: %+v, %v, logs %q; want completed with L4003 by the fire", out, err, logs)
			}
			if _, settled = entries(t, p.m.js, run, c.key); len(settled) != 1 || settled[0].Status != "failed" || settled[0].Error == nil || settled[0].Error.Code != "L4003" {
				t.Fatalf("%s settled %+v; want once, failed L4003", c.key, settled)
			}
			select {
			case <-seats.goal(x.Token):
			default:
				t.Fatalf("the resumed turn %s was not withdrawn at its deadline", x.Token)
			}
			if _, err := rundriver.Resume(t.Context(), cfg, run); err == nil {
				t.Fatal("resumed a completed run")
			}
		})
	}
}
