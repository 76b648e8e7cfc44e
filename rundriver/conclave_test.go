package rundriver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// seat is an agent whose presence row a conclave test writes.
type seat struct {
	name string
	p    protocol.Principal
	uid  string
}

func (f *fixture) seat(name, actor, uidChar string) seat {
	f.t.Helper()
	s := seat{name: name, p: protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}, uid: strings.Repeat(uidChar, 26)}
	kv, err := f.js.KeyValue(f.t.Context(), protocol.BucketPresence(space))
	if err != nil {
		f.t.Fatal(err)
	}
	row := protocol.Presence{Card: protocol.AgentCard{ID: s.p.String(), Name: name, Kind: "agent"}, Status: protocol.StatusIdle,
		TS: time.Now().UnixMilli(), LifecycleUID: s.uid}
	b, _ := json.Marshal(row)
	if _, err := kv.Put(f.t.Context(), s.p.String(), b); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// row reads s's membership row of channel; nil when there is none.
func (f *fixture) row(channel string, s seat) *protocol.Membership {
	f.t.Helper()
	kv := membersBucket{js: f.js, bucket: protocol.BucketMembers(space)}
	r, _, err := readMembership(f.t.Context(), kv, protocol.MembershipKey(channel, s.p, s.uid))
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// registered reports whether the channel registry holds a row for channel.
func (f *fixture) registered(channel string) bool {
	f.t.Helper()
	kv, err := f.js.KeyValue(f.t.Context(), protocol.BucketChannels(space))
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = kv.Get(f.t.Context(), channel)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

// plan reads the plan the conclave at key bound on its last pending entry.
func (f *fixture) plan(run, key string) conclavePlan {
	f.t.Helper()
	p, _ := f.entries(run, key)
	var plan conclavePlan
	if len(p) == 0 || json.Unmarshal(p[len(p)-1].External, &plan) != nil {
		f.t.Fatalf("%s bound no plan: %+v", key, p)
	}
	return plan
}

func (f *fixture) post(channel, text string) {
	f.t.Helper()
	if _, err := f.js.Publish(f.t.Context(), protocol.ChatSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "poster"}, channel), []byte(`{"text":"`+text+`"}`)); err != nil {
		f.t.Fatal(err)
	}
}

// pendingToken is the answer token of the pending checkpoint at key, once it is bound.
func (f *fixture) pendingToken(run, key string) string {
	f.t.Helper()
	var tok string
	meshtest.Until(f.t, "checkpoint "+key+" is bound", 20*time.Second, func() bool {
		p, s := f.entries(run, key)
		if len(p) < 2 || len(s) != 0 {
			return false
		}
		tok = Token(p[len(p)-1])
		return true
	})
	return tok
}

func handleSrc(s seat, withUID bool) string {
	agent := s.name
	if withUID {
		agent += "#" + s.uid
	}
	return `{ agent: "` + agent + `", persona: "dev" }`
}

// Members of a conclave become members of its derived channel while its body runs (their
// rows active from CHAT's frontier, the channel registered), and the close releases
// them: the entry settles ok with the closed fact true and the body's value, having bound
// its plan once; a replay performs nothing again.
func TestConclaveJoinsRunsAndCloses(t *testing.T) {
	f := newFixture(t)
	a, b := f.seat("dev-1", "seat1", "b"), f.seat("dev-2", "seat2", "c")
	f.post("general", "before")
	prog, run, err := Prepare(`const a = ` + handleSrc(a, true) + `;
const b = ` + handleSrc(b, false) + `;
const r = await conclave([a, b, a], async (room) => { await checkpoint("mid", "Go on?", { timeout: "1h" }); return room.channel; }, { name: "huddle" });
log("room " + r);`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Outcome, 1)
	go func() {
		out, err := Start(t.Context(), f.cfg(), prog, run, "")
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	tok := f.pendingToken(run, "/conclave:huddle#0/b:in/checkpoint:mid#0")
	key := "/conclave:huddle#0"
	plan := f.plan(run, key)
	p, _ := f.entries(run, key)
	if plan.Channel != ConclaveChannel(p[0].RequestID) || !plan.Registered || len(plan.Members) != 2 {
		t.Fatalf("plan %+v; want the derived channel, registered, two members (the duplicate collapsed)", plan)
	}
	for i, s := range []seat{a, b} {
		m := plan.Members[i]
		r := f.row(plan.Channel, s)
		if m.Principal != s.p.String() || m.UID != s.uid || m.Generation != 1 || !m.Joined {
			t.Fatalf("member %d planned %+v", i, m)
		}
		if r == nil || !r.Active() || r.State != protocol.MembershipActive || r.JoinCursor != 1 || r.Generation != 1 || r.Activated == nil || !*r.Activated {
			t.Fatalf("%s's row while the room is open: %+v", s.name, r)
		}
	}
	if !f.registered(plan.Channel) {
		t.Fatal("the minted channel is not in the registry while the room is open")
	}
	f.post(plan.Channel, "in the room")
	f.answer(run, tok, "yes")
	var out Outcome
	select {
	case out = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}
	if out.State != runstore.StateCompleted {
		t.Fatalf("run %+v", out)
	}
	p, s := f.entries(run, key)
	if len(p) != 2 || len(s) != 1 || s[0].Status != "ok" || string(s[0].Closed) != "true" || string(s[0].Result) != `"`+plan.Channel+`"` {
		t.Fatalf("conclave journaled %d pending and %+v settled; want begin and bind, then ok, closed, its channel", len(p), s)
	}
	for _, x := range []seat{a, b} {
		r := f.row(plan.Channel, x)
		if r == nil || r.Active() || r.State != protocol.MembershipLeft || *r.LeaveCursor != 2 || r.Generation != 1 {
			t.Fatalf("%s's row after the close: %+v; want left at CHAT 2", x.name, r)
		}
	}
	if f.registered(plan.Channel) {
		t.Fatal("the close left the minted channel's registry row")
	}
	if len(f.logs) != 1 || f.logs[0] != "room "+plan.Channel {
		t.Fatalf("logged %v", f.logs)
	}
}

// A program-named channel is borrowed: a member already in it (a resident) is neither
// joined again nor evicted, its registry row stays, and only the row the conclave wrote
// is tombstoned. A body that fails closes the room too: the entry settles failed with the
// closed fact true, and the program catches the failure.
func TestConclaveBorrowedChannelAndFailingBody(t *testing.T) {
	f := newFixture(t)
	a, b := f.seat("dev-res", "seat4", "e"), f.seat("dev-vis", "seat5", "f")
	ch, err := f.js.KeyValue(t.Context(), protocol.BucketChannels(space))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Put(t.Context(), "war-room", []byte(`{"description":"the operators' room"}`)); err != nil {
		t.Fatal(err)
	}
	members := membersBucket{js: f.js, bucket: protocol.BucketMembers(space)}
	yes := true
	resident := protocol.Membership{Channel: "war-room", Owner: a.p.String(), UID: a.uid, State: protocol.MembershipActive, Activated: &yes, Generation: 3, Writer: "suite", UpdatedAt: 1}
	if err := writeMembership(t.Context(), members, protocol.MembershipKey("war-room", a.p, a.uid), resident, 0); err != nil {
		t.Fatal(err)
	}
	prog, run, err := Prepare(`const a = ` + handleSrc(a, true) + `;
const b = ` + handleSrc(b, true) + `;
const bad = "soon" + "";
try {
  await conclave([a, b], async (room) => { await sleep(bad, { name: "nap" }); return 1; }, { name: "sync", channel: "war-room" });
} catch (e) {
  log("caught " + e.code);
}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run %+v %v", out, err)
	}
	plan := f.plan(run, "/conclave:sync#0")
	if plan.Channel != "war-room" || plan.Registered || len(plan.Members) != 2 || plan.Members[0].Joined || plan.Members[0].Generation != 3 || !plan.Members[1].Joined {
		t.Fatalf("plan %+v; want war-room borrowed, the resident not joined", plan)
	}
	_, s := f.entries(run, "/conclave:sync#0")
	if len(s) != 1 || s[0].Status != "failed" || s[0].Error == nil || s[0].Error.Code != "L4016" || string(s[0].Closed) != "true" {
		t.Fatalf("settled %+v; want failed L4016, closed (logged %v)", s, f.logs)
	}
	if r := f.row("war-room", a); r == nil || !r.Active() || r.Generation != 3 {
		t.Fatalf("the resident's row: %+v; want still active at generation 3", r)
	}
	if r := f.row("war-room", b); r == nil || r.Active() || r.Generation != 1 {
		t.Fatalf("the visitor's row: %+v; want left at generation 1", r)
	}
	if !f.registered("war-room") {
		t.Fatal("a borrowed channel's registry row was deleted")
	}
	if len(f.logs) != 1 || f.logs[0] != "caught L4016" {
		t.Fatalf("logged %v", f.logs)
	}
}

// A member with no presence row (or only another incarnation's) is the conclave's own
// catchable L4002: nothing is bound and no row written. A wildcard channel is refused
// before anything is written.
func TestConclaveAbsentMemberAndWildcard(t *testing.T) {
	f := newFixture(t)
	stale := f.seat("dev-stale", "seat6", "g")
	prog, run, err := Prepare(`try {
  await conclave([{ agent: "dev-stale#` + strings.Repeat("z", 26) + `", persona: "dev" }], async (room) => 1, { name: "huddle" });
} catch (e) {
  log("caught " + e.code);
}
try {
  await conclave([], async (room) => 1, { name: "wild", channel: "war.*" });
} catch (e) {
  log("wild " + e.code);
}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run %+v %v", out, err)
	}
	p, s := f.entries(run, "/conclave:huddle#0")
	if len(p) != 1 || len(s) != 1 || s[0].Status != "failed" || s[0].Error.Code != "L4002" || s[0].Error.Kind != "conclave" || len(s[0].External) != 0 {
		t.Fatalf("journaled %+v / %+v; want failed L4002 with no plan", p, s)
	}
	if r := f.row(ConclaveChannel(s[0].RequestID), stale); r != nil {
		t.Fatalf("a row was written: %+v", r)
	}
	_, s = f.entries(run, "/conclave:wild#0")
	if len(s) != 1 || s[0].Error == nil || s[0].Error.Code != "L4000" || !strings.Contains(s[0].Error.Message, "war.*") {
		t.Fatalf("wildcard settled %+v", s)
	}
	if strings.Join(f.logs, ",") != "caught L4002,wild L4000" {
		t.Fatalf("logged %v", f.logs)
	}
}

// A conclave that loses a race is cancelled: its entry settles cancelled with the closed
// fact false (it did not close itself), and the driver releases what it wrote: the row is
// tombstoned and the minted registry row deleted.
func TestConclaveCancelledAsRaceLoser(t *testing.T) {
	f := newFixture(t)
	a := f.seat("dev-doomed", "seat7", "h")
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(100)
			}
		}
	}()
	prog, run, err := Prepare(`const a = ` + handleSrc(a, true) + `;
const r = await race({
  fast: () => sleep("2s", { name: "quick" }),
  room: () => conclave([a], async (room) => { await checkpoint("park", "Wait?", { timeout: "1h" }); return 1; }, { name: "doomed" }),
});
log("winner " + r.index);`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Start(t.Context(), f.cfg(), prog, run, "")
	if err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run %+v %v", out, err)
	}
	key := "/race#0/b:room/conclave:doomed#0"
	plan := f.plan(run, key)
	_, s := f.entries(run, key)
	if len(s) != 1 || s[0].Status != "cancelled" || string(s[0].Closed) != "false" {
		t.Fatalf("settled %+v; want cancelled, closed false", s)
	}
	if r := f.row(plan.Channel, a); r == nil || r.Active() {
		t.Fatalf("the loser's row: %+v; want tombstoned", r)
	}
	if f.registered(plan.Channel) {
		t.Fatal("the loser's minted registry row is still there")
	}
	if len(f.logs) != 1 || f.logs[0] != "winner fast" {
		t.Fatalf("logged %v", f.logs)
	}
}

// A driver killed while the conclave's body waits leaves the entry pending with its plan
// and the rows in place; the resume re-enters from the recorded plan with the member's
// presence gone: it binds nothing again, does not move the landed row's join cursor
// although CHAT moved on, and closes the room when the body ends.
func TestConclaveKilledInsideAndResumed(t *testing.T) {
	f := newFixture(t)
	a := f.seat("dev-re", "seat8", "j")
	prog, run, err := Prepare(`const a = ` + handleSrc(a, true) + `;
await conclave([a], async (room) => { await checkpoint("mid", "Go on?", { timeout: "1h" }); return null; }, { name: "huddle" });
log("done");`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(t.Context())
	first := make(chan Outcome, 1)
	go func() {
		out, _ := Start(ctx, f.cfg(), prog, run, "")
		first <- out
	}()
	cp := "/conclave:huddle#0/b:in/checkpoint:mid#0"
	tok := f.pendingToken(run, cp)
	kill()
	if out := <-first; out.State != runstore.StateReleased {
		t.Fatalf("killed run %+v", out)
	}
	key := "/conclave:huddle#0"
	plan := f.plan(run, key)
	before := f.row(plan.Channel, a)
	if p, s := f.entries(run, key); len(p) != 2 || len(s) != 0 || before == nil || !before.Active() {
		t.Fatalf("after the kill: %d pending, %d settled, row %+v; want the plan bound and the row open", len(p), len(s), before)
	}
	for range 3 {
		f.post("general", "meanwhile")
	}
	pres, err := f.js.KeyValue(t.Context(), protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	if err := pres.Delete(t.Context(), a.p.String()); err != nil {
		t.Fatal(err)
	}
	second := make(chan Outcome, 1)
	go func() {
		out, err := Resume(t.Context(), f.cfg(), run)
		if err != nil {
			t.Error(err)
		}
		second <- out
	}()
	meshtest.Until(t, "the resume waits at the checkpoint", 20*time.Second, func() bool {
		return len(f.journal(run)) > 0 && runstore.LastActivation(f.journal(run)).Epoch == 2
	})
	if r := f.row(plan.Channel, a); r == nil || r.JoinCursor != before.JoinCursor || r.Generation != 1 || !r.Active() {
		t.Fatalf("the resumed open moved the row: %+v, was %+v", r, before)
	}
	f.answer(run, tok, "yes")
	var out Outcome
	select {
	case out = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("the resumed run did not end")
	}
	if out.State != runstore.StateCompleted {
		t.Fatalf("resumed run %+v", out)
	}
	p, s := f.entries(run, key)
	if len(p) != 2 || len(s) != 1 || string(s[0].Closed) != "true" {
		t.Fatalf("conclave journaled %d pending, %+v settled; want the one plan and one closed settle", len(p), s)
	}
	if r := f.row(plan.Channel, a); r == nil || r.Active() || r.JoinCursor != before.JoinCursor || r.Generation != 1 {
		t.Fatalf("the row after the resumed close: %+v", r)
	}
	if f.registered(plan.Channel) {
		t.Fatal("the registry row outlived the resumed close")
	}
}

// migrate: an orphaned conclave that closed is ignored; one still open (its driver killed
// inside it) or cancelled (closed false, as the reference records it) is rejected L5014.
func TestMigrateConclaveOrphans(t *testing.T) {
	f := newFixture(t)
	a := f.seat("dev-m", "seat9", "k")
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.Add(100)
			}
		}
	}()
	edited, err := lang.Compile(`log("no conclave");`)
	if err != nil {
		t.Fatal(err)
	}
	verdict := func(run string) runstore.Orphan {
		t.Helper()
		sp := &runstore.Space{JS: f.js, Name: space, Now: f.clock.Load}
		rep, err := sp.Migrate(t.Context(), run, edited)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rep.Orphans {
			if o.Kind == "conclave" {
				return o
			}
		}
		t.Fatalf("no conclave orphan in %+v", rep)
		return runstore.Orphan{}
	}
	prog, run, err := Prepare(`const a = ` + handleSrc(a, true) + `;
await conclave([a], async (room) => 1, { name: "huddle" });`)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Start(t.Context(), f.cfg(), prog, run, ""); err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run %+v %v", out, err)
	}
	if o := verdict(run); o.Verdict != runstore.VerdictIgnored {
		t.Fatalf("a closed conclave's orphan: %+v; want ignored", o)
	}
	open := f.startKilled(`const a = `+handleSrc(a, true)+`;
await conclave([a], async (room) => { await sleep("1s", { name: "nap" }); return 1; }, { name: "huddle" });`, "/conclave:huddle#0/b:in/sleep:nap#0")
	if o := verdict(open); o.Verdict != runstore.VerdictRejected || o.Code != "L5014" {
		t.Fatalf("an open conclave's orphan: %+v; want rejected L5014", o)
	}
	prog, lost, err := Prepare(`const a = ` + handleSrc(a, true) + `;
await race({
  fast: () => sleep("2s", { name: "quick" }),
  room: () => conclave([a], async (room) => { await checkpoint("park", "Wait?", { timeout: "1h" }); return 1; }, { name: "doomed" }),
});`)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Start(t.Context(), f.cfg(), prog, lost, ""); err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("run %+v %v", out, err)
	}
	if o := verdict(lost); o.Verdict != runstore.VerdictRejected || o.Code != "L5014" {
		t.Fatalf("a cancelled conclave's orphan (closed false): %+v; want rejected L5014", o)
	}
}
