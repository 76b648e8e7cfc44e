package client_test

import (
	"sync"
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

// TestLivePositionNotClaimedBeforeThePostArrives: the broker hands a post to the CHAT
// stream before it has routed it to every subscriber, so carol can read CHAT's last
// sequence while the post at it is still on its way to her. She holds her messages until
// acked (TakeOnAck, as `cotal mcp` does) and closes with that post unread: her next
// session must get it. Claiming the sequence she read as read live at once confirmed a
// position covering the post before it was surfaced (nothing waited to be taken, so the
// claim counted as taken), and the post was lost: the first post of the benchmark's
// first mcp round, lost for one member in one run of five.
func TestLivePositionNotClaimedBeforeThePostArrives(t *testing.T) {
	const sp = "team"
	m := meshtest.Start(t, sp)
	js := m.Provision(sp, provision.Options{})
	serveDelivery(t, m, sp)
	mint := func(actor string) trust.Creds {
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		uid := protocol.NewLifecycleUID()
		if _, err := provision.Agent(t.Context(), js, sp, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(m.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
			AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// PositionEvery of an hour: only this test confirms live positions.
	connect := func(actor string, c trust.Creds) *client.Endpoint {
		ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: sp, Name: actor, LifecycleUID: c.LifecycleUID,
			PositionEvery: time.Hour, Logger: brokertest.Logger(t)},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		return ep
	}
	carolCreds := mint("carol")
	carol := connect("carol", carolCreds)
	carol.TakeOnAck()
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	client.SetLiveClock(carol, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	advance := func() { mu.Lock(); defer mu.Unlock(); clock = clock.Add(client.LiveLag) }
	within(t, "carol's join", func() error { return carol.Join(t.Context(), "general") })
	if ok, why, _ := carol.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	alice := connect("alice", mint("alice"))
	within(t, "alice's join", func() error { return alice.Join(t.Context()) })
	if _, err := alice.Post(t.Context(), "general", client.Text("before")); err != nil {
		t.Fatal(err)
	}
	first := <-carol.Messages()
	if err := first.Ack(); err != nil { // taken: what carol read before is confirmed as usual
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), protocol.StreamChat(sp))
	if err != nil {
		t.Fatal(err)
	}
	stored := s.CachedInfo().State.LastSeq
	client.ConfirmLive(t.Context(), carol)
	advance()
	// The stream stored the next post; the broker has not routed it to carol yet.
	if err := client.ConfirmLiveReading(t.Context(), carol, stored+1); err != nil {
		t.Fatal(err)
	}
	advance()
	late, err := alice.Post(t.Context(), "general", client.Text("late"))
	if err != nil {
		t.Fatal(err)
	}
	if late.Seq != stored+1 {
		t.Fatalf("the late post is at %d, want %d", late.Seq, stored+1)
	}
	select {
	case in := <-carol.Messages(): // held, never acked: the model was not given it
		if in.Text() != "late" {
			t.Fatalf("carol shown %q, want late", in.Text())
		}
	case <-time.After(hangGuard):
		t.Fatal("carol not shown the late post")
	}
	client.ConfirmLive(t.Context(), carol)
	if err := carol.Close(); err != nil {
		t.Fatal(err)
	}

	next := connect("carol", carolCreds)
	next.TakeOnAck()
	within(t, "carol's next join", func() error { return next.Join(t.Context(), "general") })
	list, err := next.Memberships(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range list {
		if ms.Channel == "general" && ms.Position >= late.Seq {
			t.Fatalf("carol's confirmed position is %d: it covers the late post (%d), which she never took", ms.Position, late.Seq)
		}
	}
	select {
	case in := <-next.Messages():
		if in.Text() != "late" || !in.Durable {
			t.Fatalf("carol's next session shown %q (durable %v), want the late post's copy", in.Text(), in.Durable)
		}
	case <-time.After(hangGuard):
		t.Fatal("the late post never reached carol's next session: lost")
	}
}
