package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// timerPlane is a provisioned space with the timer writer's credential connected.
type timerPlane struct {
	t   *testing.T
	m   *mesh
	js  jetstream.JetStream // the delivery daemon's credential
	ept jetstream.Stream
}

func newTimerPlane(t *testing.T) *timerPlane {
	m := newMesh(t, 30*time.Second)
	js, err := jetstream.New(m.Connect(m.Mint(space, meshtest.DeliverySpec())))
	if err != nil {
		t.Fatal(err)
	}
	ept, err := m.js.Stream(t.Context(), provision.StreamEPT(space))
	if err != nil {
		t.Fatal(err)
	}
	return &timerPlane{t: t, m: m, js: js, ept: ept}
}

// start runs a timer writer on the daemon's credential until the returned stop is called.
func (p *timerPlane) start() (stop func()) {
	ctx, cancel := context.WithCancel(p.t.Context())
	done := make(chan error, 1)
	w := &TimerWriter{Space: space, JS: p.js}
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			p.t.Errorf("timer writer: %v", err)
		}
	}
	p.t.Cleanup(stop)
	return stop
}

// request publishes a schedule request as a host would (here the provisioner).
func (p *timerPlane) request(timer string, gen, at int64, h nats.Header) {
	p.t.Helper()
	b, _ := json.Marshal(TimerRequest{V: 1, TimerID: timer, Generation: gen, Deadline: at})
	msg := &nats.Msg{Subject: protocol.TimerSubject(space, "manager", "host1", "3", timer, protocol.TimerSchedule), Data: b, Header: h}
	if _, err := p.m.js.PublishMsg(p.t.Context(), msg); err != nil {
		p.t.Fatal(err)
	}
}

func (p *timerPlane) last(timer, phase string) *jetstream.RawStreamMsg {
	m, err := p.ept.GetLastMsgForSubject(p.t.Context(), protocol.TimerSubject(space, "manager", "host1", "3", timer, phase))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

func (p *timerPlane) count(timer, phase string) uint64 {
	subj := protocol.TimerSubject(space, "manager", "host1", "3", timer, phase)
	info, err := p.ept.Info(p.t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		p.t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

func (p *timerPlane) waitFire(timer string) TimerRequest {
	p.t.Helper()
	var m *jetstream.RawStreamMsg
	meshtest.Until(p.t, "the fire of "+timer, deadline, func() bool { m = p.last(timer, protocol.TimerFire); return m != nil })
	if got, want := m.Header.Get(jetstream.SchedulerHeader), protocol.TimerSubject(space, "manager", "host1", "3", timer, protocol.TimerArmed); got != want {
		p.t.Fatalf("fire of %s: Nats-Scheduler %q, want the armed subject %q", timer, got, want)
	}
	var body TimerRequest
	if err := json.Unmarshal(m.Data, &body); err != nil {
		p.t.Fatal(err)
	}
	if m.Time.UnixMilli() < body.Deadline {
		p.t.Fatalf("fire of %s at %d, before its deadline %d", timer, m.Time.UnixMilli(), body.Deadline)
	}
	return body
}

// A request waiting in EPT_REQ is armed when the writer starts, and its fire comes at its
// deadline although the writer stopped in between: the timer lives in the stream.
func TestTimerWriterArmsAndFiresAcrossRestart(t *testing.T) {
	p := newTimerPlane(t)
	at := time.Now().Add(2 * time.Second).UnixMilli()
	p.request("cp1", 1, at, nil) // before any writer runs
	stop := p.start()
	meshtest.Until(t, "the armed schedule", deadline, func() bool {
		return p.last("cp1", protocol.TimerArmed) != nil || p.last("cp1", protocol.TimerFire) != nil
	})
	stop()
	if got := p.waitFire("cp1"); got != (TimerRequest{V: 1, TimerID: "cp1", Generation: 1, Deadline: at}) {
		t.Fatalf("fire body %+v", got)
	}
	// The writer's restart re-reads nothing and arms nothing twice.
	stop = p.start()
	sentinel := time.Now().Add(300 * time.Millisecond).UnixMilli()
	p.request("sentinel", 1, sentinel, nil)
	p.waitFire("sentinel")
	stop()
	if n := p.count("cp1", protocol.TimerFire); n != 1 {
		t.Fatalf("cp1 fired %d times, want once", n)
	}
}

// A request the writer reads again after its timer fired (its ack lost: the writer stopped
// or died between arming and acknowledging it, and the durable redelivers it) arms
// nothing: the timer of that generation fires once. Its deadline is past by then, so a
// second arm would fire again at once.
func TestTimerWriterRedeliveredRequestFiresOnce(t *testing.T) {
	p := newTimerPlane(t)
	p.start()
	at := time.Now().Add(300 * time.Millisecond).UnixMilli()
	p.request("cp1", 1, at, nil)
	p.waitFire("cp1")
	p.request("cp1", 1, at, nil) // as the durable would redeliver it
	p.request("sentinel", 1, time.Now().Add(time.Second).UnixMilli(), nil)
	p.waitFire("sentinel") // requests are armed in order: cp1's second, past due, before
	if n := p.count("cp1", protocol.TimerFire); n != 1 {
		t.Fatalf("cp1 fired %d times, want once", n)
	}
}

// A re-armed timer (a higher generation) supersedes the earlier one on its subject, a
// stale generation arriving later changes nothing, and a request carrying a scheduling
// header or a body naming another timer is refused: only one fire comes, the latest
// generation's, and the refused timers never arm.
func TestTimerWriterGenerationsAndRefusals(t *testing.T) {
	p := newTimerPlane(t)
	p.start()
	now := time.Now()
	// Generation 1 is due in an hour, so however late the writer arms it, it cannot fire
	// before generation 2 replaces it. The stale request is due at once: armed wrongly,
	// it would replace generation 2 and fire as generation 1.
	first, second := now.Add(time.Hour).UnixMilli(), now.Add(4*time.Second).UnixMilli()
	p.request("cp2", 1, first, nil)
	p.request("cp2", 2, second, nil)
	p.request("cp2", 1, now.UnixMilli(), nil) // stale: generation 2 is armed
	// The refused requests are due before the sentinel: armed wrongly, they would fire.
	refused := now.Add(3 * time.Second).UnixMilli()
	h := nats.Header{}
	h.Set(jetstream.ScheduleTargetHeader, protocol.TimerSubject(space, "manager", "victim", "1", "cp9", protocol.TimerFire))
	p.request("forged", 1, refused, h)
	b, _ := json.Marshal(TimerRequest{V: 1, TimerID: "other", Generation: 1, Deadline: refused})
	if _, err := p.m.js.Publish(t.Context(), protocol.TimerSubject(space, "manager", "host1", "3", "liar", protocol.TimerSchedule), b); err != nil {
		t.Fatal(err)
	}
	// The sentinel's deadline is after every other: once it fired, every earlier
	// schedule has had its turn.
	p.request("sentinel", 1, now.Add(5*time.Second).UnixMilli(), nil)
	p.waitFire("sentinel")
	if got := p.waitFire("cp2"); got.Generation != 2 || got.Deadline != second {
		t.Fatalf("cp2 fired %+v, want generation 2 at %d", got, second)
	}
	if n := p.count("cp2", protocol.TimerFire); n != 1 {
		t.Fatalf("cp2 fired %d times, want once (generation 1 superseded)", n)
	}
	for _, timer := range []string{"forged", "liar"} {
		if p.last(timer, protocol.TimerArmed) != nil || p.last(timer, protocol.TimerFire) != nil {
			t.Fatalf("the refused request %s was armed", timer)
		}
	}
	victim := protocol.TimerSubject(space, "manager", "victim", "1", "cp9", protocol.TimerFire)
	if _, err := p.ept.GetLastMsgForSubject(t.Context(), victim); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the forged target %s got a message: %v", victim, err)
	}
}

// The delivery lane runs the timer writer: a request published while it serves is armed
// and fires.
func TestLaneArmsTimers(t *testing.T) {
	p := newTimerPlane(t)
	serve(t, p.m.lane())
	at := time.Now().Add(200 * time.Millisecond).UnixMilli()
	p.request("lane1", 1, at, nil)
	if got := p.waitFire("lane1"); got.Deadline != at {
		t.Fatalf("fire %+v, want deadline %d", got, at)
	}
}

// The armed schedule's body, and so its fire's, is the reference's (testdata/
// timer_body.json, written from packages/core/src/endpoint-checkpoint.ts
// armCheckpointTimer), and a request in that shape reads back whole.
func TestTimerBodyGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/timer_body.json")
	if err != nil {
		t.Fatal(err)
	}
	var req TimerRequest
	if err := json.Unmarshal(want, &req); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(req)
	if err != nil || !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("timer body %s (%v), want %s", got, err, want)
	}
}
