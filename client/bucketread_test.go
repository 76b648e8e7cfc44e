package client_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// credPeer connects to m with a credential of profile for actor; an agent (reading and
// posting general) also joins. It is closed at cleanup.
func credPeer(t *testing.T, m *meshtest.Mesh, js jetstream.JetStream, profile trust.Profile, actor, uid string) (*client.Endpoint, *nats.Conn) {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	spec := trust.UserSpec{Name: actor, Profile: profile, Principal: p, LifecycleUID: uid}
	if profile == trust.ProfileAgent {
		spec.AllowSubscribe, spec.AllowPublish = []string{"general"}, []string{"general"}
		if _, err := provision.Agent(t.Context(), js, space, p, uid, ""); err != nil {
			t.Fatal(err)
		}
	}
	nc := m.Connect(m.Mint(space, spec), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // refusals are checked by their effect
	ep, err := client.New(nc, client.Config{Space: space, Name: actor, LifecycleUID: uid,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if profile != trust.ProfileAgent {
		return ep, nc // observers and admins write no presence: they read only
	}
	if err := ep.Join(t.Context()); err != nil {
		t.Fatalf("join %s: %v", actor, err)
	}
	return ep, nc
}

// consumerCount counts stream's consumers other than the watchers the provisioner
// pre-creates for each agent lifecycle (protocol.ConsumerKVWatch, bound by the
// reference's agent endpoints; a Go endpoint leaves them unbound).
func consumerCount(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	names := s.ConsumerNames(t.Context())
	for name := range names.Name() {
		if !strings.HasPrefix(name, "kvw-") {
			n++
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// One agent flooding the public buckets with consumer creates gets none, and every
// profile still reads the roster, watches presence and lists the registry, without a
// consumer of its own on either bucket.
func TestBucketReadsNeedNoConsumer(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	presence, channels := "KV_"+protocol.BucketPresence(space), "KV_"+protocol.BucketChannels(space)
	if _, err := js.Stream(t.Context(), protocol.StreamChat(space)); err != nil {
		t.Fatal(err)
	}
	reg, err := js.KeyValue(t.Context(), protocol.BucketChannels(space))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Put(t.Context(), "general", []byte(`{"deliveryClass":"live"}`)); err != nil {
		t.Fatal(err)
	}

	_, mnc := credPeer(t, m, js, trust.ProfileAgent, "mallory", "mmmmmmmmmmmmmmmmmmmmmmmmmm")
	// The flood: 1000 creates of each form on each bucket, fired without waiting.
	for i := range 1000 {
		for _, s := range []string{presence, channels} {
			name := fmt.Sprintf("x%d", i)
			for _, subj := range []string{
				"$JS.API.CONSUMER.CREATE." + s,
				"$JS.API.CONSUMER.CREATE." + s + "." + name,
				"$JS.API.CONSUMER.DURABLE.CREATE." + s + "." + name,
			} {
				body, _ := json.Marshal(map[string]any{"stream_name": s, "config": map[string]any{"durable_name": name, "name": name}})
				if err := mnc.PublishRequest(subj, mnc.NewInbox(), body); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := mnc.FlushTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{presence, channels} {
		if n := consumerCount(t, js, s); n != 0 {
			t.Fatalf("%s has %d consumers after an agent's flood, want 0", s, n)
		}
	}

	alice, _ := credPeer(t, m, js, trust.ProfileAgent, "alice", "aaaaaaaaaaaaaaaaaaaaaaaaaa")
	console, _ := credPeer(t, m, js, trust.ProfileObserver, "console", "cccccccccccccccccccccccccc")
	web, _ := credPeer(t, m, js, trust.ProfileAdmin, "web", "wwwwwwwwwwwwwwwwwwwwwwwwww")
	for _, ep := range []*client.Endpoint{alice, console, web} {
		me := ep.Principal().String()
		peers, err := ep.Roster(t.Context())
		if err != nil {
			t.Fatalf("%s roster: %v", me, err)
		}
		var ids []string
		for _, p := range peers {
			ids = append(ids, p.Card.ID)
		}
		for _, want := range []string{"local.alice", "local.mallory"} {
			if !slices.Contains(ids, want) {
				t.Fatalf("%s roster %v lacks %s", me, ids, want)
			}
		}
		stats, err := ep.ChannelStats(t.Context())
		if err != nil {
			t.Fatalf("%s channel stats: %v", me, err)
		}
		if len(stats) != 1 || stats[0].Name != "general" || stats[0].Config.DeliveryClass != "live" {
			t.Fatalf("%s channel stats %+v, want general (live)", me, stats)
		}
	}

	// A watch sees the snapshot, then a join and a leave live.
	changes, err := console.WatchPresence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]protocol.Status{}
	wait := func(id string, st protocol.Status) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for seen[id] != st {
			select {
			case c := <-changes:
				seen[c.Card.ID] = c.State()
			case <-timeout:
				t.Fatalf("watch: %s never became %s (seen %v)", id, st, seen)
			}
		}
	}
	wait("local.alice", protocol.StatusIdle)
	if n := consumerCount(t, js, presence); n != 0 {
		t.Fatalf("a presence watch holds %d consumers, want 0", n)
	}
	bob, _ := credPeer(t, m, js, trust.ProfileAgent, "bob", "bbbbbbbbbbbbbbbbbbbbbbbbbb")
	wait("local.bob", protocol.StatusIdle)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	wait("local.bob", protocol.StatusOffline)
}
