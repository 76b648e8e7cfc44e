package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

const space = "main"

// mesh starts a broker, provisions space as an open mesh and returns its URL.
func mesh(t testing.TB) string {
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

// peer connects and joins as name; it is closed at cleanup.
func peer(t *testing.T, url string, cfg client.Config, channels ...string) *client.Endpoint {
	t.Helper()
	cfg.Space = space
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	ep, err := client.Connect(t.Context(), url, cfg)
	if err != nil {
		t.Fatalf("connect %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context(), channels...); err != nil {
		t.Fatalf("join %s: %v", cfg.Name, err)
	}
	return ep
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// next waits for the next message on ep, acks it and returns it.
func next(t *testing.T, ep *client.Endpoint) *client.Incoming {
	t.Helper()
	select {
	case in := <-ep.Messages():
		if err := in.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
		return in
	case <-time.After(10 * time.Second):
		t.Fatalf("%s got no message", ep.Principal())
		return nil
	}
}

func TestMulticastDMAnycast(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice", Role: "planner"}, "team.backend")
	bob := peer(t, url, client.Config{Name: "bob", Role: "reviewer"}, "team.>")
	ctx := t.Context()

	if _, err := alice.Post(ctx, "team.backend", client.Draft{Parts: []protocol.Part{protocol.TextPart("hello team")}, Mentions: []string{" Bob "}}); err != nil {
		t.Fatal(err)
	}
	in := next(t, bob)
	if in.Kind != protocol.DeliveryChannel || in.Text() != "hello team" || in.From.ID != "local.alice" || in.Channel != "team.backend" || in.Historical || in.Durable {
		t.Fatalf("multicast: %+v", in)
	}
	if len(in.Mentions) != 1 || in.Mentions[0] != "bob" {
		t.Fatalf("mentions %v", in.Mentions)
	}

	target, err := alice.Resolve(ctx, "Bob")
	if err != nil || target.Principal.String() != "local.bob" || target.State != protocol.StatusIdle {
		t.Fatalf("resolve bob: %+v %v", target, err)
	}
	sent, err := alice.DM(ctx, target.Principal, client.Text("psst"))
	if err != nil || sent.Seq == 0 || sent.Stream != "DM_main" {
		t.Fatalf("dm: %+v %v", sent, err)
	}
	in = next(t, bob)
	if in.Kind != protocol.DeliveryDM || in.Text() != "psst" || !in.Durable || in.Seq != sent.Seq || in.To != "local.bob" {
		t.Fatalf("dm: %+v", in)
	}

	if _, err := alice.Ask(ctx, "reviewer", client.Text("review pls")); err != nil {
		t.Fatal(err)
	}
	in = next(t, bob)
	if in.Kind != protocol.DeliveryAnycast || in.Text() != "review pls" || in.Subject.Role != "reviewer" {
		t.Fatalf("anycast: %+v", in)
	}
	// Alice does not hear her own post echoed back.
	select {
	case in := <-alice.Messages():
		t.Fatalf("alice got %+v", in)
	default:
	}
}

func TestRosterStatusAndLeave(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob", Role: "builder"})
	ctx := t.Context()

	state := func(name string) protocol.Status {
		peers, err := alice.Roster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.Card.Name == name {
				return p.State()
			}
		}
		return ""
	}
	if got := state("bob"); got != protocol.StatusIdle {
		t.Fatalf("bob is %q, want idle", got)
	}
	if err := bob.SetStatus(ctx, protocol.StatusWorking); err != nil {
		t.Fatal(err)
	}
	if err := bob.SetActivity(ctx, "reviewing #12"); err != nil {
		t.Fatal(err)
	}
	if got := state("bob"); got != protocol.StatusWorking {
		t.Fatalf("bob is %q, want working", got)
	}
	if err := bob.SetStatus(ctx, protocol.StatusOffline); err == nil {
		t.Fatal("a live endpoint set itself offline")
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	if got := state("bob"); got != protocol.StatusOffline {
		t.Fatalf("bob is %q after leaving, want offline at once", got)
	}
}

func TestDMToOfflinePeerIsKept(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	ctx := t.Context()

	if _, err := alice.Resolve(ctx, "bob"); !errors.Is(err, client.ErrUnknownPeer) {
		t.Fatalf("resolve a peer that never joined: %v", err)
	}
	bob := peer(t, url, client.Config{Name: "bob"})
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	target, err := alice.Resolve(ctx, "bob")
	if err != nil || target.State != protocol.StatusOffline {
		t.Fatalf("resolve offline bob: %+v %v", target, err)
	}
	for _, text := range []string{"one", "two"} {
		if _, err := alice.DM(ctx, target.Principal, client.Text(text)); err != nil {
			t.Fatal(err)
		}
	}
	back := peer(t, url, client.Config{Name: "bob"})
	for _, want := range []string{"one", "two"} {
		if in := next(t, back); in.Text() != want || in.Kind != protocol.DeliveryDM {
			t.Fatalf("bob got %q, want %q", in.Text(), want)
		}
	}
	// Both were acked: a third incarnation gets nothing old, only what is new.
	if err := back.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DM(ctx, target.Principal, client.Text("three")); err != nil {
		t.Fatal(err)
	}
	third := peer(t, url, client.Config{Name: "bob"})
	if in := next(t, third); in.Text() != "three" {
		t.Fatalf("third incarnation got %q first, want three", in.Text())
	}
}

func TestAnycastReachesExactlyOneHolder(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	workers := []*client.Endpoint{
		peer(t, url, client.Config{Name: "w1", Role: "worker"}),
		peer(t, url, client.Config{Name: "w2", Role: "worker"}),
		peer(t, url, client.Config{Name: "w3", Role: "worker"}),
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case in := <-w.Messages():
					if err := in.Ack(); err != nil {
						t.Error(err)
					}
					mu.Lock()
					got[in.Text()]++
					mu.Unlock()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for i := range 10 {
		if _, err := alice.Ask(t.Context(), "worker", client.Text(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Until(t, "ten anycasts", hangGuard, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 10
	})
	// The work queue is empty once all ten are acked: nothing is left to deliver twice.
	meshtest.Until(t, "an empty work queue", hangGuard, func() bool {
		s, err := alice.JetStream().Stream(t.Context(), "TASK_main")
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
	cancel()
	wg.Wait()
	for text, n := range got {
		if n != 1 {
			t.Errorf("%q delivered %d times", text, n)
		}
	}
}

func TestLateJoinerSeesHistoryOnce(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"}, "general")
	ctx := t.Context()
	for _, text := range []string{"h1", "h2", "h3"} {
		if _, err := alice.Post(ctx, "general", client.Text(text)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Post(ctx, "other", client.Text("elsewhere")); err != nil {
		t.Fatal(err)
	}
	carol := peer(t, url, client.Config{Name: "carol"}, "general")
	for _, want := range []string{"h1", "h2", "h3"} {
		if in := next(t, carol); in.Text() != want || !in.Historical || in.Kind != protocol.DeliveryChannel {
			t.Fatalf("carol got %+v, want historical %q", in, want)
		}
	}
	if _, err := alice.Post(ctx, "general", client.Text("live")); err != nil {
		t.Fatal(err)
	}
	if in := next(t, carol); in.Text() != "live" || in.Historical {
		t.Fatalf("carol got %+v, want live message", in)
	}
	select {
	case in := <-carol.Messages():
		t.Fatalf("carol got an extra %q", in.Text())
	default:
	}
}

// syncBuffer is a log sink tests can read while the endpoint writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestForgedSenderIsDroppedAndLogged(t *testing.T) {
	url := mesh(t)
	var logs syncBuffer
	bob := peer(t, url, client.Config{Name: "bob", Logger: slog.New(slog.NewTextHandler(&logs, nil))}, "general")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	forged, _ := json.Marshal(protocol.Message{ID: "forged-1", TS: 1, Space: space, Channel: "general",
		From: protocol.EndpointRef{ID: "local.alice", Name: "alice"}, Parts: []protocol.Part{protocol.TextPart("I am alice")}})
	if err := nc.Publish(protocol.ChatSubject(space, protocol.Principal{Owner: "local", Actor: "mallory"}, "general"), forged); err != nil {
		t.Fatal(err)
	}
	honest, _ := json.Marshal(protocol.Message{ID: "honest-1", TS: 2, Space: space, Channel: "general",
		From: protocol.EndpointRef{ID: "local.mallory", Name: "mallory"}, Parts: []protocol.Part{protocol.TextPart("I am mallory")}})
	if err := nc.Publish(protocol.ChatSubject(space, protocol.Principal{Owner: "local", Actor: "mallory"}, "general"), honest); err != nil {
		t.Fatal(err)
	}
	if in := next(t, bob); in.ID != "honest-1" {
		t.Fatalf("bob surfaced %q (%q), want only the honest message", in.ID, in.Text())
	}
	if !strings.Contains(logs.String(), "reason=sender-mismatch") {
		t.Fatalf("no sender-mismatch in the log:\n%s", logs.String())
	}
}

func TestWatchPresenceSeesJoinAndLeave(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes, err := alice.WatchPresence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bob := peer(t, url, client.Config{Name: "bob"})
	wait := func(want protocol.Status) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case c := <-changes:
				if c.Card.Name == "bob" && c.State() == want {
					return
				}
			case <-deadline:
				t.Fatalf("no change of bob to %s", want)
			}
		}
	}
	wait(protocol.StatusIdle)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	wait(protocol.StatusOffline)
}

func TestBadInput(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	ctx := t.Context()
	if _, err := alice.Post(ctx, "team/backend", client.Text("x")); !errors.Is(err, protocol.ErrInvalidChannel) {
		t.Fatalf("post to a bad channel: %v", err)
	}
	if _, err := alice.Post(ctx, "team.*", client.Text("x")); !errors.Is(err, protocol.ErrInvalidChannel) {
		t.Fatalf("post to a wildcard: %v", err)
	}
	if err := alice.JoinChannel(ctx, "a.>.b"); !errors.Is(err, protocol.ErrInvalidChannel) {
		t.Fatalf("join a bad pattern: %v", err)
	}
	if _, err := alice.Post(ctx, "general", client.Draft{}); err == nil {
		t.Fatal("posted a message without parts")
	}
	for _, cfg := range []client.Config{{Space: space}, {Space: space, Name: "bob-the-builder"}, {Space: "a.b", Name: "x"}} {
		if _, err := client.Connect(ctx, url, cfg); err == nil {
			t.Fatalf("connect with %+v succeeded", cfg)
		}
	}
	ep, err := client.Connect(ctx, url, client.Config{Space: "nowhere", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if err := ep.Join(ctx); !errors.Is(err, client.ErrNotProvisioned) {
		t.Fatalf("join an unprovisioned space: %v", err)
	}
}

// A DM the application naks comes back to the same endpoint: the id window lets a
// naked copy through again rather than dropping (and acking) it as a duplicate.
func TestNakedDMComesBack(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob"})
	target, err := alice.Resolve(t.Context(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DM(t.Context(), target.Principal, client.Text("again")); err != nil {
		t.Fatal(err)
	}
	take := func() *client.Incoming {
		t.Helper()
		select {
		case in := <-bob.Messages():
			return in
		case <-time.After(10 * time.Second):
			t.Fatal("bob got no message")
			return nil
		}
	}
	first := take()
	if first.Text() != "again" {
		t.Fatalf("bob got %q", first.Text())
	}
	if err := first.Nak(); err != nil {
		t.Fatal(err)
	}
	second := take()
	if second.Text() != "again" || second.ID != first.ID || second.Delivered < 2 {
		t.Fatalf("after the nak bob got %q (%s, delivered %d), want the same DM again", second.Text(), second.ID, second.Delivered)
	}
	if err := second.Ack(); err != nil {
		t.Fatal(err)
	}
}

// A peer cannot take another's id as its display name: a principal resolves to that
// principal (its roster entry, else its inbox), before any display name, online or not.
func TestResolveByIDBeforeName(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	ctx := t.Context()
	bob := peer(t, url, client.Config{Name: "bob"})
	bobID := bob.Principal().String()
	impostor := peer(t, url, client.Config{Name: bobID, Actor: "mallory"})
	if got, err := alice.Resolve(ctx, bobID); err != nil || got.Principal != bob.Principal() {
		t.Fatalf("resolve %s with bob online: %+v %v, want bob", bobID, got, err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := alice.Resolve(ctx, bobID); err != nil || got.Principal != bob.Principal() || got.State != protocol.StatusOffline {
		t.Fatalf("resolve %s with bob gone: %+v %v, want bob offline", bobID, got, err)
	}
	// The impostor is still found by its own id.
	if got, err := alice.Resolve(ctx, impostor.Principal().String()); err != nil || got.Principal != impostor.Principal() {
		t.Fatalf("resolve the impostor by its id: %+v %v", got, err)
	}
}
