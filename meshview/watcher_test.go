package meshview_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

const space = "main"

// openMesh starts a broker with space provisioned as an open mesh and returns its URL.
func openMesh(t testing.TB) string {
	t.Helper()
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return srv.ClientURL()
}

// peer connects name and joins channels; closed at cleanup.
func peer(t testing.TB, url, name string, channels ...string) *client.Endpoint {
	t.Helper()
	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: name, Logger: brokertest.Logger(t),
		Meta: map[string]any{"connector": "claude"}})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context(), channels...); err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
	return ep
}

// watch starts a watcher (a hidden observer, DMs tapped) on url with clock now.
func watch(t testing.TB, url string, now func() time.Time) (*meshview.Model, *client.Endpoint) {
	t.Helper()
	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "webview", Kind: protocol.CardEndpoint, Logger: brokertest.Logger(t)})
	if err != nil {
		t.Fatalf("connect observer: %v", err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	m := meshview.New(meshview.Config{Now: now, ChannelDepth: 3, Logger: brokertest.Logger(t)})
	w := &meshview.Watcher{Endpoint: ep, Model: m, DMs: true, Logger: brokertest.Logger(t)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- nil // for the cleanup
		t.Fatalf("watcher: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("watcher not ready")
	}
	return m, ep
}

func agent(m *meshview.Model, name string) (meshview.Agent, bool) {
	for _, a := range m.Roster() {
		if a.Name == name {
			return a, true
		}
	}
	return meshview.Agent{}, false
}

func TestWatcherFollowsTheSpace(t *testing.T) {
	url := openMesh(t)
	clock := meshtestClock(t)
	m, _ := watch(t, url, clock)
	alice := peer(t, url, "alice", "team")
	bob := peer(t, url, "bob", "team")
	ctx := t.Context()

	// Presence: both appear idle; the watcher itself never does.
	meshtest.Until(t, "alice and bob idle", 10*time.Second, func() bool {
		a, ok1 := agent(m, "alice")
		b, ok2 := agent(m, "bob")
		return ok1 && ok2 && a.State == protocol.StatusIdle && b.State == protocol.StatusIdle
	})
	if _, ok := agent(m, "webview"); ok {
		t.Fatal("the observer is in the roster")
	}
	if a, _ := agent(m, "alice"); a.Harness != "claude" || a.ID != "local.alice" {
		t.Fatalf("alice = %+v, want harness claude and id local.alice", a)
	}

	// Longest waiting first: alice waits, then bob.
	if err := alice.SetStatus(ctx, protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "alice waiting", 10*time.Second, func() bool { a, _ := agent(m, "alice"); return a.State == protocol.StatusWaiting })
	if err := bob.SetStatus(ctx, protocol.StatusWorking); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob working", 10*time.Second, func() bool { b, _ := agent(m, "bob"); return b.State == protocol.StatusWorking })
	if c := m.Counts(); c != (meshview.Counts{Working: 1, Waiting: 1}) {
		t.Fatalf("counts %+v, want 1 working 1 waiting", c)
	}
	if err := bob.SetStatus(ctx, protocol.StatusWaiting); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob waiting", 10*time.Second, func() bool { return len(m.NeedsYou()) == 2 })
	if ny := m.NeedsYou(); ny[0].Name != "alice" || ny[1].Name != "bob" {
		t.Fatalf("needs you %s, %s; want alice (waiting longest) first", ny[0].Name, ny[1].Name)
	}

	// Messages: sender and channel from the subject; the channel keeps its newest 3.
	for _, text := range []string{"one", "two", "three", "four"} {
		if _, err := alice.Post(ctx, "team", client.Text(text)); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Until(t, "four posts", 10*time.Second, func() bool {
		cs := m.Channels()
		return len(cs) == 1 && cs[0].Messages == 4
	})
	h, ok := m.History("team", 0)
	if !ok || len(h) != 3 || h[0].Text != "two" || h[2].Text != "four" || h[2].From != "local.alice" || h[2].Channel != "team" {
		t.Fatalf("history %+v, want two..four from local.alice on team", h)
	}
	if cs := m.Channels(); len(cs[0].Members) != 1 || cs[0].Members[0] != "local.alice" {
		t.Fatalf("members %v, want [local.alice]", cs[0].Members)
	}
	if a, _ := agent(m, "alice"); len(a.Channels) != 1 || a.Channels[0] != "team" {
		t.Fatalf("alice's channels %v, want [team]", a.Channels)
	}

	// DMs: seen by the admin view, addressed from the subject.
	if _, err := bob.DM(ctx, alice.Principal(), client.Text("psst")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the dm", 10*time.Second, func() bool { return len(m.DMs(0)) == 1 })
	if d := m.DMs(0)[0]; d.From != "local.bob" || d.To != "local.alice" || d.Text != "psst" || d.Kind != protocol.DeliveryDM {
		t.Fatalf("dm %+v", d)
	}

	// Offline: a peer that leaves is counted offline.
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob offline", 10*time.Second, func() bool { b, _ := agent(m, "bob"); return b.State == protocol.StatusOffline })
	if c := m.Counts(); c != (meshview.Counts{Waiting: 1, Offline: 1}) {
		t.Fatalf("counts %+v, want 1 waiting 1 offline", c)
	}
	if ny := m.NeedsYou(); len(ny) != 1 || ny[0].Name != "alice" {
		t.Fatalf("needs you %+v, want alice alone", ny)
	}
}

func TestResumeAfterSeq(t *testing.T) {
	m := meshview.New(meshview.Config{EventDepth: 4, Logger: slog.New(slog.DiscardHandler)})
	post := func(id string) {
		m.ApplyMessage(protocol.Received{Kind: protocol.DeliveryChannel,
			Subject: protocol.Subject{Kind: protocol.KindChat, Sender: protocol.Principal{Owner: "local", Actor: "a"}, Channel: "c"},
			Message: protocol.Message{ID: id, From: protocol.EndpointRef{ID: "local.a", Name: "a"}, Channel: "c"}})
	}
	for _, id := range []string{"1", "2", "3", "1"} { // the repeated id is not a new event
		post(id)
	}
	past, live, cancel, ok := m.SubscribeSince(1)
	defer cancel()
	if !ok || len(past) != 2 || past[0].Seq != 2 || past[1].Message.ID != "3" {
		t.Fatalf("since 1: ok %v, %+v", ok, past)
	}
	post("4")
	if ev := <-live; ev.Seq != 4 || ev.Message.ID != "4" {
		t.Fatalf("live %+v", ev)
	}
	for _, id := range []string{"5", "6", "7", "8"} {
		post(id)
	}
	if _, _, c, ok := m.SubscribeSince(1); ok { // 2..4 dropped out of the 4 kept
		t.Fatal("resume from a dropped event reported ok")
	} else {
		c()
	}
}

func TestNeedsYouAgesByTheModelClock(t *testing.T) {
	epoch := meshtestClock(t)()
	m := meshview.New(meshview.Config{Now: func() time.Time { return epoch }})
	for i, name := range []string{"late", "early"} {
		since := epoch.Add(-time.Duration(i+1) * time.Minute).UnixMilli()
		m.ApplyPeer(client.Peer{Online: true, Presence: protocol.Presence{
			Card:   protocol.AgentCard{ID: "local." + name, Name: name, Kind: protocol.CardAgent},
			Status: protocol.StatusWaiting, TS: epoch.UnixMilli(), StatusSince: since}})
	}
	ny := m.NeedsYou()
	if len(ny) != 2 || ny[0].Name != "early" || ny[0].WaitingMS != 2*60_000 || ny[1].WaitingMS != 60_000 {
		t.Fatalf("needs you %+v, want early (2m) then late (1m)", ny)
	}
}
