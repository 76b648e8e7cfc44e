package client_test

import (
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// hangGuard bounds every wait; no test waits for it to pass.
const hangGuard = 20 * time.Second

// postN posts n numbered texts ("<prefix>000"...) to channel from ep.
func postN(t *testing.T, ep *client.Endpoint, channel, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := ep.Post(t.Context(), channel, client.Text(fmt.Sprintf("%s%03d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// within runs f and fails the test if it has not returned by the hang guard.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("%s blocked: it must return while nobody reads Messages()", what)
	}
}

// expectTexts reads the next len(want) messages of ep, acking each, and checks their
// texts in order.
func expectTexts(t *testing.T, ep *client.Endpoint, want []string) []*client.Incoming {
	t.Helper()
	var got []*client.Incoming
	for i, w := range want {
		in := next(t, ep)
		if in.Text() != w {
			t.Fatalf("message %d: %q (historical %v, durable %v), want %q", i, in.Text(), in.Historical, in.Durable, w)
		}
		got = append(got, in)
	}
	return got
}

func texts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// noMore checks that ep has nothing more to surface once a marker post has come through.
func noMore(t *testing.T, from, ep *client.Endpoint, channel string) {
	t.Helper()
	if _, err := from.Post(t.Context(), channel, client.Text("marker")); err != nil {
		t.Fatal(err)
	}
	if in := next(t, ep); in.Text() != "marker" {
		t.Fatalf("extra message %q (historical %v, durable %v) before the marker", in.Text(), in.Historical, in.Durable)
	}
}

// TestLongHistoryDoesNotLockJoinersOut: Join and JoinChannel return while a channel holds
// far more history than Messages() has room for and nobody reads it yet; the history then
// streams in order, ahead of live posts.
func TestLongHistoryDoesNotLockJoinersOut(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	postN(t, alice, "general", "g", 300)
	postN(t, alice, "random", "r", 300)

	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "carol", InboxSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	within(t, "Join with 300 posts of history", func() error { return ep.Join(t.Context(), "general") })
	within(t, "JoinChannel with 300 more", func() error { return ep.JoinChannel(t.Context(), "random") })
	if _, err := alice.Post(t.Context(), "general", client.Text("live")); err != nil {
		t.Fatal(err)
	}
	// Each channel's history is in order, and general's live post follows its history.
	var g, r []string
	for len(g) < 301 || len(r) < 300 {
		in := next(t, ep)
		if in.Channel == "general" {
			g = append(g, in.Text())
			if in.Historical != (len(g) <= 300) {
				t.Fatalf("general message %d %q: historical %v", len(g), in.Text(), in.Historical)
			}
		} else {
			r = append(r, in.Text())
		}
	}
	if fmt.Sprint(g) != fmt.Sprint(append(texts("g", 300), "live")) || fmt.Sprint(r) != fmt.Sprint(texts("r", 300)) {
		t.Fatalf("out of order:\ngeneral %v\nrandom %v", g, r)
	}
	noMore(t, alice, ep, "general")
}

// TestClosingDuringReplayEndsPromptly: an endpoint whose reader never reads closes at
// once, its history reader ended with it.
func TestClosingDuringReplayEndsPromptly(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	postN(t, alice, "general", "g", 300)
	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "carol", InboxSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "Join", func() error { return ep.Join(t.Context(), "general") })
	within(t, "Close while history is still replaying", ep.Close)
}

// TestRejoinShowsOnlyNewHistory: a member who comes back with the cursor of its last
// session is shown only what it missed, in order; without the cursor, all of it.
func TestRejoinShowsOnlyNewHistory(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	postN(t, alice, "general", "old", 3)

	first := peer(t, url, client.Config{Name: "carol"}, "general")
	expectTexts(t, first, texts("old", 3))
	if _, err := alice.Post(t.Context(), "general", client.Text("seen live")); err != nil {
		t.Fatal(err)
	}
	expectTexts(t, first, []string{"seen live"})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	shown := first.Shown()
	if shown.Channels["general"] != 4 || shown.Stream.IsZero() {
		t.Fatalf("shown after the first session: %+v, want general through seq 4", shown)
	}
	postN(t, alice, "general", "missed", 3)

	again := resume(t, url, "carol", shown)
	for _, in := range expectTexts(t, again, texts("missed", 3)) {
		if !in.Historical {
			t.Fatalf("%q is not marked historical", in.Text())
		}
	}
	noMore(t, alice, again, "general")

	// A cursor of another incarnation of the stream is ignored: all history shows.
	stale := client.Shown{Stream: shown.Stream.Add(-time.Hour), Channels: map[string]uint64{"general": 7}}
	other := resume(t, url, "dave", stale)
	expectTexts(t, other, append(append(texts("old", 3), "seen live"), append(texts("missed", 3), "marker")...))
}

// resume connects as name with the history cursor shown and joins general.
func resume(t *testing.T, url, name string, shown client.Shown) *client.Endpoint {
	t.Helper()
	ep, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	ep.SetShown(shown)
	if err := ep.Join(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestReturningDurableMemberGetsEveryMissedPost: a durable member back to 300 posts it
// missed (more than Messages() holds) joins at once and gets each once, in order, as
// durable copies (not history); its hand-off copies are acked, and the next rejoin shows
// none of them again.
func TestReturningDurableMemberGetsEveryMissedPost(t *testing.T) {
	const sp = "team"
	m := meshtest.Start(t, sp)
	js := m.Provision(sp, provision.Options{})
	serveDelivery(t, m, sp)
	uidOf := func(actor string) string { return (actor + "00000000000000000000000000")[:26] }
	agent := func(actor string, inbox int, shown client.Shown) *client.Endpoint {
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		if _, err := provision.Agent(t.Context(), js, sp, p, uidOf(actor), ""); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(m.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uidOf(actor),
			AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}))
		if err != nil {
			t.Fatal(err)
		}
		ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: sp, Name: actor, LifecycleUID: c.LifecycleUID,
			InboxSize: inbox, Logger: brokertest.Logger(t)},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		ep.SetShown(shown)
		return ep
	}
	bob := agent("bob", 0, client.Shown{})
	within(t, "first join", func() error { return bob.Join(t.Context(), "general") })
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := agent("alice", 0, client.Shown{})
	within(t, "alice joins", func() error { return alice.Join(t.Context()) })
	postN(t, alice, "general", "m", 300)
	// Wait until the daemon has copied them all, so the hand-off holds 300 copies.
	dlv, err := js.Stream(t.Context(), protocol.StreamDLV(sp))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "300 copies stored", hangGuard, func() bool {
		info, err := dlv.Info(t.Context())
		return err == nil && info.State.Msgs >= 300
	})

	for round, shown := range []client.Shown{{}, bob.Shown()} { // without its cursor, then with it
		back := agent("bob", 16, shown)
		within(t, "rejoin with 300 missed posts", func() error { return back.Join(t.Context(), "general") })
		if shown.Channels == nil {
			// Missed posts are real messages, not history: they wake an agent.
			for _, in := range expectTexts(t, back, texts("m", 300)) {
				if !in.Durable || in.Historical {
					t.Fatalf("%q: durable %v, historical %v; want a durable copy", in.Text(), in.Durable, in.Historical)
				}
			}
		}
		noMore(t, alice, back, "general")
		cons, err := js.Consumer(t.Context(), protocol.StreamDLV(sp), protocol.ConsumerDLV(back.Principal(), uidOf("bob")))
		if err != nil {
			t.Fatal(err)
		}
		meshtest.Until(t, fmt.Sprintf("hand-off drained (round %d)", round), hangGuard, func() bool {
			info, err := cons.Info(t.Context())
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})
		if err := back.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLostMeshIsReportedOnceAndGivenUp: a stopped broker is one lost event, its return on
// the same address one back event (and the endpoint works again), and a broker gone for
// good closes Lost after ReconnectFor with a reason naming the wait.
func TestLostMeshIsReportedOnceAndGivenUp(t *testing.T) {
	srv := brokertest.Start(t)
	url := srv.ClientURL()
	{
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}
	// ReconnectFor covers the broker's restart below (recovering the space's streams
	// from disk, slow on a loaded machine); it is no measure.
	ep := peer(t, url, client.Config{Name: "carol", Heartbeat: 50 * time.Millisecond, ReconnectFor: 10 * time.Second}, "general")
	event := func(connected bool) {
		t.Helper()
		select {
		case ev := <-ep.ConnEvents():
			if ev.Connected != connected {
				t.Fatalf("event %+v, want connected %v", ev, connected)
			}
		case <-time.After(hangGuard):
			t.Fatalf("no event (want connected %v)", connected)
		}
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	event(false)
	again := &broker.Server{Dir: srv.Dir, Port: port, Logger: brokertest.Logger(t)}
	if err := again.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Close() })
	event(true)
	alice := peer(t, url, client.Config{Name: "alice"})
	if _, err := alice.Post(t.Context(), "general", client.Text("after")); err != nil {
		t.Fatal(err)
	}
	if in := next(t, ep); in.Text() != "after" {
		t.Fatalf("got %q after the reconnect", in.Text())
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	event(false)
	select {
	case <-ep.Lost():
	case <-time.After(hangGuard):
		t.Fatal("Lost did not close after ReconnectFor")
	}
	if err := ep.LostErr(); err == nil || !strings.Contains(err.Error(), "did not come back within 10s") {
		t.Fatalf("LostErr %v", err)
	}
	select {
	case ev := <-ep.ConnEvents():
		t.Fatalf("extra event %+v", ev)
	default:
	}
}
