package meshview_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
)

// teamMesh starts an authenticated mesh with space provisioned and returns it.
func teamMesh(t *testing.T) *meshtest.Mesh {
	t.Helper()
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	return m
}

// teamAgent connects as a fresh agent credential of name, as cotal mcp does.
func teamAgent(t *testing.T, m *meshtest.Mesh, name string) (*nats.Conn, protocol.Principal) {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(t.Context(), m.Provisioner(space), space, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	return m.Connect(m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		Subscribe: []string{"general"}, AllowPublish: []string{"general"}})), p
}

// watchTeam runs a TeamWatcher on the admin credential the dashboard mints.
func watchTeam(t *testing.T, m *meshtest.Mesh, model *meshview.Model) *meshview.TeamWatcher {
	t.Helper()
	nc := m.Connect(m.Mint(space, trust.UserSpec{Name: "web", Profile: trust.ProfileAdmin,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "web_1"}, LifecycleUID: protocol.NewLifecycleUID()}))
	w := &meshview.TeamWatcher{Conn: nc, Space: space, Model: model, Every: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("team watcher: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- nil
		t.Fatalf("team watcher: %v", err)
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatal("team watcher not ready")
	}
	return w
}

// nextEvent waits for the next event of type typ, skipping others.
func nextEvent(t *testing.T, events <-chan meshview.Event, typ string) meshview.Event {
	t.Helper()
	deadline := time.After(10 * time.Second) // a hang guard only
	for {
		select {
		case ev := <-events:
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

// The board and the claims written by agents on their own credentials reach the model
// live, read on the admin credential the views use: a task with its holder, a status
// change, a claim, its release, and a claim that expires with no write at all.
func TestTeamWatcherFollowsBoardAndClaims(t *testing.T) {
	m := teamMesh(t)
	anc, alice := teamAgent(t, m, "alice")
	bnc, bob := teamAgent(t, m, "bob")
	ab, err := taskboard.Connect(t.Context(), anc, space, alice, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bb, err := taskboard.Connect(t.Context(), bnc, space, bob, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One task before the watcher starts: the model is seeded with it.
	first, err := ab.Create(t.Context(), taskboard.TaskRow{Title: "seeded", Role: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	model := meshview.New(meshview.Config{})
	events, stop := model.Subscribe()
	defer stop()
	w := watchTeam(t, m, model)
	if ts := model.Tasks(); len(ts) != 1 || ts[0].ID != first.ID || ts[0].Status != taskboard.Open || ts[0].Creator != alice.String() {
		t.Fatalf("seeded tasks = %+v", ts)
	}

	task, err := ab.Create(t.Context(), taskboard.TaskRow{Title: "fix <script>alert(1)</script> \x1b[2J", Role: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events, meshview.EventTask)
	if ev.Task == nil || ev.Task.ID != task.ID || ev.Task.Status != taskboard.Open || ev.Task.Title != task.Title {
		t.Fatalf("create event = %+v", ev.Task)
	}
	if _, err := bb.Claim(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, meshview.EventTask)
	if ev.Task.ID != task.ID || ev.Task.Holder != bob.String() || ev.Task.Status != taskboard.Claimed || ev.Task.LeaseUntil == 0 {
		t.Fatalf("claim event = %+v", ev.Task)
	}
	if _, err := bb.Update(t.Context(), task.ID, taskboard.Working, "on it"); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, meshview.EventTask)
	if ev.Task.Status != taskboard.Working || ev.Task.Note != "on it" {
		t.Fatalf("update event = %+v", ev.Task)
	}
	ts := model.Tasks()
	if len(ts) != 2 || ts[1].Holder != bob.String() || ts[1].Status != taskboard.Working {
		t.Fatalf("tasks = %+v", ts)
	}

	ajs, _ := jetstream.New(anc)
	as := &claims.Store{JS: ajs, Space: space, Holder: alice, Name: "alice"}
	if _, err := as.Claim(t.Context(), claims.Request{Paths: []string{"internal/web"}, TTL: time.Hour, Exclusive: true, Reason: "refactor"}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, meshview.EventClaim)
	if c := ev.Claim; c == nil || ev.Gone || c.Path != "internal/web" || c.Holder != alice.String() || !c.Exclusive || c.Reason != "refactor" || c.Since == 0 || c.Expires <= c.Since {
		t.Fatalf("claim event = %+v", ev)
	}
	if _, _, err := as.Release(t.Context(), []string{"internal/web"}, false); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, meshview.EventClaim)
	if !ev.Gone || ev.Claim.Path != "internal/web" || ev.Claim.Holder != alice.String() {
		t.Fatalf("release event = %+v", ev)
	}
	if cs := model.Claims(); len(cs) != 0 {
		t.Fatalf("claims after release = %+v", cs)
	}

	// A claim of the shortest ttl lapses on its own; the model drops it without a write.
	bjs, _ := jetstream.New(bnc)
	if _, err := (&claims.Store{JS: bjs, Space: space, Holder: bob}).Claim(t.Context(), claims.Request{Paths: []string{"go.mod"}, TTL: claims.MinTTL}); err != nil {
		t.Fatal(err)
	}
	if ev = nextEvent(t, events, meshview.EventClaim); ev.Gone || ev.Claim.Path != "go.mod" {
		t.Fatalf("short claim event = %+v", ev)
	}
	if ev = nextEvent(t, events, meshview.EventClaim); !ev.Gone || ev.Claim.Path != "go.mod" {
		t.Fatalf("expiry event = %+v", ev)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("watcher error: %v", err)
	}
}

// A space made before the board and the claims existed has neither bucket: the watcher
// still starts, and says why both are empty.
func TestTeamWatcherWithoutBuckets(t *testing.T) {
	m := teamMesh(t)
	js := m.Provisioner(space)
	for _, b := range []string{taskboard.Bucket(space), claims.Bucket(space)} {
		if err := js.DeleteKeyValue(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	model := meshview.New(meshview.Config{})
	events, stop := model.Subscribe()
	defer stop()
	w := watchTeam(t, m, model)
	if err := w.Err(); err == nil {
		t.Fatal("no error for a space without the buckets")
	}
	if len(model.Tasks()) != 0 || len(model.Claims()) != 0 {
		t.Fatal("tasks or claims from nowhere")
	}

	// The next `cotal up` adds the buckets: the first task written there arrives live.
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	nc, alice := teamAgent(t, m, "alice")
	b, err := taskboard.Connect(t.Context(), nc, space, alice, taskboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.Create(t.Context(), taskboard.TaskRow{Title: "after the upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events, meshview.EventTask); ev.Task.ID != task.ID {
		t.Fatalf("event = %+v", ev.Task)
	}
}
