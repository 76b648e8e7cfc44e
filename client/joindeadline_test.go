package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// TestJoinKeepsItsDeadlineOverLongHistory: on an authenticated mesh with durable
// channels, a Join with a short deadline returns within it while a channel holds 1 000
// posts for the joiner and nobody reads Messages() (4 places): a new member's history
// and a returning member's missed posts both stream in afterwards, in order. (Until
// history replayed on its own reader, Join replayed it under the caller's context and
// blocked until the application read.)
func TestJoinKeepsItsDeadlineOverLongHistory(t *testing.T) {
	const (
		sp    = "team"
		posts = 1000
	)
	m := meshtest.Start(t, sp)
	js := m.Provision(sp, provision.Options{})
	serveDelivery(t, m, sp)
	agent := func(actor string, inbox int) *client.Endpoint {
		uid := (actor + "00000000000000000000000000")[:26]
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		if _, err := provision.Agent(t.Context(), js, sp, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(m.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
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
		return ep
	}
	joinBy := func(ep *client.Endpoint, deadline time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		defer cancel()
		within(t, "join", func() error { return ep.Join(ctx, "general") })
		if ctx.Err() != nil {
			t.Fatalf("join returned only after its %s deadline", deadline)
		}
	}
	bob := agent("bob", 0)
	joinBy(bob, 5*time.Second)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := agent("alice", 0)
	joinBy(alice, 5*time.Second)
	for i := 0; i < posts; i += 100 {
		for _, text := range texts("m", posts)[i : i+100] {
			msg := alice.Envelope(client.Text(text))
			msg.Channel = "general"
			if _, err := alice.PublishAsync(protocol.ChatSubject(sp, alice.Principal(), "general"), msg); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-alice.JetStream().PublishAsyncComplete():
		case <-time.After(hangGuard):
			t.Fatal("posts not acked")
		}
	}
	carol := agent("carol", 4) // new: the posts are its history
	joinBy(carol, 3*time.Second)
	back := agent("bob", 4) // returning: the posts are missed posts, handed off
	joinBy(back, 3*time.Second)
	for _, ep := range []*client.Endpoint{carol, back} {
		for _, in := range expectTexts(t, ep, texts("m", posts)) {
			if in.Historical == (ep == back) {
				t.Fatalf("%s got %q historical %v", ep.Principal(), in.Text(), in.Historical)
			}
		}
	}
}
