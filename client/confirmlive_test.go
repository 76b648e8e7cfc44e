package client_test

import (
	"context"
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

// TestLiveConfirmationWithTheLastPostInTheHandler: carol's live handler holds the last
// post of a burst (her Messages() is full) when she reads CHAT's last sequence to confirm
// her position; nats.go then counts that post both handed over and queued. Once she takes
// her messages the confirmation completes at once, not when another post comes or its
// wait runs out.
func TestLiveConfirmationWithTheLastPostInTheHandler(t *testing.T) {
	const sp = "team"
	m := meshtest.Start(t, sp)
	js := m.Provision(sp, provision.Options{})
	serveDelivery(t, m, sp)
	agent := func(actor string, inbox int) *client.Endpoint {
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
		// PositionEvery of an hour: only this test confirms.
		ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: sp, Name: actor, LifecycleUID: c.LifecycleUID,
			InboxSize: inbox, PositionEvery: time.Hour, Logger: brokertest.Logger(t)},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		return ep
	}
	carol := agent("carol", 1)
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	client.SetLiveClock(carol, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	within(t, "carol's join", func() error { return carol.Join(t.Context(), "general") })
	if ok, why, _ := carol.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	alice := agent("alice", 0)
	within(t, "alice's join", func() error { return alice.Join(t.Context()) })
	var last uint64
	for _, text := range []string{"one", "two"} {
		sent, err := alice.Post(t.Context(), "general", client.Text(text))
		if err != nil {
			t.Fatal(err)
		}
		last = sent.Seq
	}
	// "one" waits in Messages(), "two" in the handler, which cannot hand it over.
	meshtest.Until(t, "the second post held in carol's handler", hangGuard, func() bool {
		_, delivered := client.LivePosition(carol, "general")
		return delivered == 2 && len(carol.Messages()) == 1
	})
	confirmed := make(chan struct{})
	go func() {
		defer close(confirmed)
		cctx, ccancel := context.WithTimeout(t.Context(), hangGuard)
		defer ccancel()
		client.ConfirmLive(cctx, carol)
	}()
	meshtest.Until(t, "the confirmation waiting for carol's handler", hangGuard, func() bool { return client.ConfirmLiveWaits(carol) })
	for _, want := range []string{"one", "two"} {
		select {
		case in := <-carol.Messages():
			if in.Text() != want {
				t.Fatalf("carol shown %q, want %q", in.Text(), want)
			}
		case <-time.After(hangGuard):
			t.Fatalf("carol not shown %q", want)
		}
	}
	select {
	case <-confirmed:
	case <-time.After(5 * time.Second):
		t.Fatal("the confirmation still waits for a post beyond the last one carol received")
	}
	// What this confirmation read is claimed live by a later one, liveLag on.
	mu.Lock()
	clock = clock.Add(client.LiveLag)
	mu.Unlock()
	client.ConfirmLive(t.Context(), carol)
	if live, _ := client.LivePosition(carol, "general"); live < last {
		t.Fatalf("carol's live position is %d, want %d", live, last)
	}
}
