package taskboard_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
)

const space = "prod"

// clock is a settable clock for the boards of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type mesh struct {
	m     *meshtest.Mesh
	js    jetstream.JetStream
	clock *clock
}

func newMesh(t testing.TB) *mesh {
	t.Helper()
	m := meshtest.Start(t, space)
	return &mesh{m: m, js: m.Provision(space, provision.Options{}), clock: &clock{t: testclock.Epoch(t)}}
}

// agent mints a real agent credential for local.<name> and connects with it.
func (ms *mesh) agent(t testing.TB, name string) *nats.Conn {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(t.Context(), ms.js, space, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	return ms.m.Connect(ms.m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: []string{">"}, AllowPublish: []string{">"}}))
}

func (ms *mesh) board(t testing.TB, name string) *taskboard.Board {
	t.Helper()
	b, err := taskboard.Connect(t.Context(), ms.agent(t, name), space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: name},
		taskboard.Options{Now: ms.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRacingClaimsHaveOneWinner: five agents claim each of 30 tasks at once; exactly one
// wins each, every loser is told who holds it, and the winner's done is final.
func TestRacingClaimsHaveOneWinner(t *testing.T) {
	ms := newMesh(t)
	boards := []*taskboard.Board{ms.board(t, "a"), ms.board(t, "b"), ms.board(t, "c"), ms.board(t, "d"), ms.board(t, "e")}
	for range 30 {
		task, err := boards[0].Create(t.Context(), taskboard.TaskRow{Title: "race"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(boards))
		for i, b := range boards {
			wg.Go(func() { _, errs[i] = b.Claim(t.Context(), task.ID) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("task %s: %d and %d both won", task.ID, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, taskboard.ErrHeld):
				t.Fatalf("claim by %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("task %s: nobody won: %v", task.ID, errs)
		}
		if _, err := boards[winner].Update(t.Context(), task.ID, taskboard.Done, "ok"); err != nil {
			t.Fatal(err)
		}
		for _, b := range boards {
			got, err := b.Get(t.Context(), task.ID)
			if err != nil || got.Status != taskboard.Done || got.Holder != boards[winner].Me().String() {
				t.Fatalf("after done: %+v %v", got, err)
			}
		}
	}
}

// TestForgeryRefusedByBroker: bob, on his real minted agent credential and raw nats.go,
// tries to take alice's claimed task: write her claim or status rows, delete them, roll
// the bucket up, or open a consumer on it. The broker refuses each, and the one write it
// allows (bob's own status row) changes nothing in the fold.
func TestForgeryRefusedByBroker(t *testing.T) {
	ms := newMesh(t)
	alice := ms.board(t, "alice")
	task, err := alice.Create(t.Context(), taskboard.TaskRow{Title: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Update(t.Context(), task.ID, taskboard.Working, "on it"); err != nil {
		t.Fatal(err)
	}
	bobNC := ms.agent(t, "bob")
	bob, _ := jetstream.New(bobNC)
	bucket := "$KV." + taskboard.Bucket(space) + "."
	short := func() context.Context { // a refused publish is never acknowledged
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	forged := []byte(`{"status":"done","note":"forged","at":"2026-11-30T12:00:00Z"}`)
	for _, k := range []string{"c." + task.ID + ".local.alice", "s." + task.ID + ".local.alice", "t." + task.ID + ".local.alice", "t.zzz.local.alice"} {
		if _, err := bob.Publish(short(), bucket+k, forged); err == nil {
			t.Fatalf("bob wrote %s", k)
		}
		del := nats.NewMsg(bucket + k)
		del.Header.Set("KV-Operation", "DEL")
		if _, err := bob.PublishMsg(short(), del); err == nil {
			t.Fatalf("bob deleted %s", k)
		}
	}
	// His own key, with a rollup that would purge every row: the bucket refuses rollups.
	roll := nats.NewMsg(bucket + "s." + task.ID + ".local.bob")
	roll.Header.Set("Nats-Rollup", "all")
	roll.Data = forged
	if _, err := bob.PublishMsg(short(), roll); err == nil {
		t.Fatal("bob rolled the bucket up")
	}
	if _, err := bobNC.Request("$JS.API.CONSUMER.CREATE.KV_"+taskboard.Bucket(space), []byte(`{}`), 2*time.Second); err == nil {
		t.Fatal("bob's consumer create on the board was answered")
	}
	// What bob may write, his own status row saying done, the fold ignores.
	if _, err := bob.Publish(t.Context(), bucket+"s."+task.ID+".local.bob", forged); err != nil {
		t.Fatalf("bob's own row: %v", err)
	}
	got, err := alice.Get(t.Context(), task.ID)
	if err != nil || got.Status != taskboard.Working || got.Holder != "local.alice" || got.Note != "on it" {
		t.Fatalf("after bob's attempts: %+v %v", got, err)
	}
	// Through the board API bob is refused with the holder named.
	bb, err := taskboard.Connect(t.Context(), bobNC, space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}, taskboard.Options{Now: ms.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bb.Update(t.Context(), task.ID, taskboard.Done, ""); !errors.Is(err, taskboard.ErrNotYours) {
		t.Fatalf("bob's update: %v", err)
	}
	if _, err := bb.Claim(t.Context(), task.ID); !errors.Is(err, taskboard.ErrHeld) {
		t.Fatalf("bob's claim: %v", err)
	}
}

// TestLeaseLapsesUnlessRenewed: a holder that renews keeps its task past the lease; one
// that stops (killed) loses it a lease after its last write, and another claims it; the
// old holder can then no longer update it.
func TestLeaseLapsesUnlessRenewed(t *testing.T) {
	ms := newMesh(t)
	alice, bob := ms.board(t, "alice"), ms.board(t, "bob")
	task, err := alice.Create(t.Context(), taskboard.TaskRow{Title: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ms.clock.Add(taskboard.Lease / 2)
		if ids, err := alice.Renew(t.Context()); err != nil || len(ids) != 1 {
			t.Fatalf("renew: %v %v", ids, err)
		}
	}
	if got, _ := bob.Get(t.Context(), task.ID); got.Holder != "local.alice" || got.Status != taskboard.Claimed {
		t.Fatalf("renewed past the lease: %+v", got)
	}
	ms.clock.Add(taskboard.Lease / 2)
	if got, err := alice.Claim(t.Context(), task.ID); err != nil || !got.LeaseUntil.Equal(ms.clock.Now().Add(taskboard.Lease)) {
		t.Fatalf("claiming again renews: %+v %v", got, err)
	}
	if _, err := bob.Claim(t.Context(), task.ID); !errors.Is(err, taskboard.ErrHeld) {
		t.Fatalf("claim of a live task: %v", err)
	}
	ms.clock.Add(taskboard.Lease + time.Second) // alice is gone
	got, err := bob.Get(t.Context(), task.ID)
	if err != nil || got.Status != taskboard.Open || got.Holder != "" || got.Lapsed != "local.alice" {
		t.Fatalf("after the lease: %+v %v", got, err)
	}
	if _, err := bob.Claim(t.Context(), task.ID); err != nil {
		t.Fatalf("claim of a lapsed task: %v", err)
	}
	if _, err := alice.Update(t.Context(), task.ID, taskboard.Done, ""); !errors.Is(err, taskboard.ErrNotYours) {
		t.Fatalf("the lapsed holder's update: %v", err)
	}
	if ids, _ := alice.Renew(t.Context()); len(ids) != 0 {
		t.Fatalf("the lapsed holder renewed %v", ids)
	}
}

// TestCancelRules: anyone cancels an open task; only the creator cancels a held one; a
// finished task changes no more.
func TestCancelRules(t *testing.T) {
	ms := newMesh(t)
	alice, bob, carol := ms.board(t, "alice"), ms.board(t, "bob"), ms.board(t, "carol")
	open, _ := alice.Create(t.Context(), taskboard.TaskRow{Title: "open one"})
	if got, err := carol.Update(t.Context(), open.ID, taskboard.Cancelled, "not needed"); err != nil || got.Status != taskboard.Cancelled {
		t.Fatalf("cancel of an open task by anyone: %+v %v", got, err)
	}
	if _, err := bob.Claim(t.Context(), open.ID); !errors.Is(err, taskboard.ErrFinished) {
		t.Fatalf("claim of a cancelled task: %v", err)
	}
	held, _ := alice.Create(t.Context(), taskboard.TaskRow{Title: "held one"})
	if _, err := bob.Claim(t.Context(), held.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Update(t.Context(), held.ID, taskboard.Cancelled, ""); !errors.Is(err, taskboard.ErrNotYours) {
		t.Fatalf("cancel of a held task by a bystander: %v", err)
	}
	if got, err := alice.Update(t.Context(), held.ID, taskboard.Cancelled, "changed plan"); err != nil || got.Status != taskboard.Cancelled {
		t.Fatalf("cancel by the creator: %+v %v", got, err)
	}
	if _, err := bob.Update(t.Context(), held.ID, taskboard.Done, ""); !errors.Is(err, taskboard.ErrFinished) {
		t.Fatalf("update of a cancelled task: %v", err)
	}
	assigned, _ := alice.Create(t.Context(), taskboard.TaskRow{Title: "for bob", Assignee: "local.bob"})
	if _, err := carol.Claim(t.Context(), assigned.ID); !errors.Is(err, taskboard.ErrNotYours) {
		t.Fatalf("claim of bob's task by carol: %v", err)
	}
	if _, err := bob.Claim(t.Context(), assigned.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Update(t.Context(), assigned.ID, "finished", ""); !errors.Is(err, taskboard.ErrBadInput) {
		t.Fatalf("unknown status: %v", err)
	}
	if _, err := bob.Create(t.Context(), taskboard.TaskRow{Title: "two\nlines"}); !errors.Is(err, taskboard.ErrBadInput) {
		t.Fatalf("two-line title: %v", err)
	}
}

// TestBoardSurvivesBrokerRestart: tasks, claims and statuses are on disk.
func TestBoardSurvivesBrokerRestart(t *testing.T) {
	ms := newMesh(t)
	alice := ms.board(t, "alice")
	task, _ := alice.Create(t.Context(), taskboard.TaskRow{Title: "durable", Role: "worker"})
	if _, err := alice.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Update(t.Context(), task.ID, taskboard.Blocked, "waiting on review"); err != nil {
		t.Fatal(err)
	}
	ms.m.Restart()
	again := ms.board(t, "carol")
	var got taskboard.Task
	meshtest.Until(t, "the board read after the restart", 10*time.Second, func() bool {
		got, _ = again.Get(t.Context(), task.ID)
		return got.ID == task.ID
	})
	if got.Status != taskboard.Blocked || got.Holder != "local.alice" || got.Note != "waiting on review" || got.Role != "worker" {
		t.Fatalf("after restart: %+v", got)
	}
}
