package claims_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const space = "main"

// agent connects as a fresh agent credential of name on the mesh, as cotal mcp does.
func agent(t *testing.T, m *meshtest.Mesh, name string) (*nats.Conn, protocol.Principal) {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	creds := m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p,
		LifecycleUID: protocol.NewLifecycleUID(), Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
	return m.Connect(creds), p
}

func store(t *testing.T, nc *nats.Conn, p protocol.Principal) *claims.Store {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &claims.Store{JS: js, Space: space, Holder: p, Name: p.Actor, Root: "/repo"}
}

func mesh(t *testing.T) *meshtest.Mesh {
	t.Helper()
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	return m
}

func TestConflictNamesHolderSinceAndReason(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	bnc, b := agent(t, m, "bob")
	alice, bob := store(t, anc, a), store(t, bnc, b)
	ctx := t.Context()

	res, err := alice.Claim(ctx, claims.Request{Paths: []string{"/repo/internal/x/"}, TTL: time.Hour, Exclusive: true, Reason: "refactor x"})
	if err != nil || len(res.Granted) != 1 || res.Granted[0].Path != "internal/x" {
		t.Fatalf("alice's claim: %+v, %v", res, err)
	}
	res, err = bob.Claim(ctx, claims.Request{Paths: []string{"docs", "internal/x/y.go"}, TTL: time.Hour, Reason: "read"})
	if err != nil || len(res.Conflicts) != 1 || len(res.Granted) != 0 {
		t.Fatalf("bob's overlapping shared claim: %+v, %v; want one conflict and nothing granted", res, err)
	}
	c := res.Conflicts[0]
	if c.Path != "internal/x/y.go" || c.Held.Holder != a.String() || c.Held.Name != "alice" || c.Held.Reason != "refactor x" || c.Held.Since <= 0 || !c.Held.Exclusive {
		t.Fatalf("conflict %+v: want alice's exclusive claim with since and reason", c)
	}
	if all, _ := bob.List(ctx); len(all) != 1 {
		t.Fatalf("a refused call wrote something: %+v", all)
	}
	// Shared claims share; an exclusive one conflicts with them.
	for _, s := range []*claims.Store{alice, bob} {
		if res, err := s.Claim(ctx, claims.Request{Paths: []string{"docs"}, TTL: time.Hour}); err != nil || len(res.Granted) != 1 {
			t.Fatalf("shared claim of docs: %+v, %v", res, err)
		}
	}
	if res, err := bob.Claim(ctx, claims.Request{Paths: []string{"."}, TTL: time.Hour, Exclusive: true}); err != nil || len(res.Conflicts) != 2 {
		t.Fatalf("bob's exclusive claim of the repository: %+v, %v; want conflicts with alice's two", res, err)
	}
	// Claiming again renews and keeps since.
	first, _ := alice.Mine(ctx)
	res, err = alice.Claim(ctx, claims.Request{Paths: []string{"internal/x"}, TTL: 2 * time.Hour, Exclusive: true, Reason: "still"})
	if err != nil || len(res.Renewed) != 1 || res.Granted[0].Since != first[1].Since {
		t.Fatalf("renewal: %+v, %v (before %+v)", res, err, first)
	}
	rel, notHeld, err := alice.Release(ctx, []string{"internal/x", "nope"}, false)
	if err != nil || len(rel) != 1 || len(notHeld) != 1 {
		t.Fatalf("release: %v %v %v", rel, notHeld, err)
	}
	if res, err := bob.Claim(ctx, claims.Request{Paths: []string{"internal/x/y.go"}, TTL: time.Hour, Exclusive: true}); err != nil || len(res.Granted) != 1 {
		t.Fatalf("claim after release: %+v, %v", res, err)
	}
}

// TestForgeryRefused attacks through the same door: bob's real agent credential on a raw
// nats.go connection tries to write, delete and roll up alice's claims.
func TestForgeryRefused(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	errs := make(chan error, 16)
	bnc, b := agent(t, m, "bob")
	bnc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	alice, bob := store(t, anc, a), store(t, bnc, b)
	ctx := t.Context()
	if _, err := alice.Claim(ctx, claims.Request{Paths: []string{"core"}, TTL: time.Hour, Exclusive: true, Reason: "mine"}); err != nil {
		t.Fatal(err)
	}
	aliceKey := "$KV." + claims.Bucket(space) + "." + claims.Key(a, "core")
	js, _ := jetstream.New(bnc)
	forged := []byte(`{"holder":"local.alice","path":"core","exclusive":false,"reason":"forged","since":1,"renewedAt":1,"expiresAt":1}`)
	for what, msg := range map[string]*nats.Msg{
		"overwrite": {Subject: aliceKey, Data: forged},
		"delete":    {Subject: aliceKey, Header: nats.Header{"KV-Operation": []string{"DEL"}}},
		"purge":     {Subject: aliceKey, Header: nats.Header{"KV-Operation": []string{"PURGE"}, "Nats-Rollup": []string{"sub"}}},
	} {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			t.Fatalf("%s of alice's claim was stored", what)
		}
	}
	// A rollup on bob's own key would purge the bucket: the bucket refuses rollups.
	own := "$KV." + claims.Bucket(space) + "." + claims.Key(b, "x")
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: own, Header: nats.Header{"Nats-Rollup": []string{"all"}}}); err == nil {
		t.Fatal("a rollup on bob's own key was stored")
	}
	// A record under bob's key that names alice is nobody's claim.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: own, Data: forged}); err != nil {
		t.Fatalf("bob writes his own key: %v", err)
	}
	got, err := bob.List(ctx)
	if err != nil || len(got) != 1 || got[0].Holder != a.String() || got[0].Reason != "mine" || !got[0].Exclusive {
		t.Fatalf("claims after the attack: %+v, %v; want alice's own, untouched", got, err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("broker answer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the broker reported no permission violation")
	}
}

// TestExpiresAfterTTL: a holder that vanishes without releasing (its connection simply
// dropped) loses its claim once the ttl passes; the broker drops the record too.
func TestExpiresAfterTTL(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	bnc, b := agent(t, m, "bob")
	if _, err := store(t, anc, a).Claim(t.Context(), claims.Request{Paths: []string{"core"}, TTL: claims.MinTTL, Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	anc.Close() // no release
	bob := store(t, bnc, b)
	meshtest.Until(t, "alice's claim lapses", 20*time.Second, func() bool {
		res, err := bob.Claim(t.Context(), claims.Request{Paths: []string{"core"}, TTL: time.Hour, Exclusive: true})
		return err == nil && len(res.Granted) == 1
	})
	js := m.Provisioner(space)
	kv, err := js.KeyValue(t.Context(), claims.Bucket(space))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the broker drops alice's record", 20*time.Second, func() bool {
		_, err := kv.Get(t.Context(), claims.Key(a, "core"))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

// TestExpiryBoundedOnRead: a record whose own expiresAt is past is not a claim, whatever
// the broker still holds (the reader's clock decides, injected here).
func TestExpiryBoundedOnRead(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	s := store(t, anc, a)
	if _, err := s.Claim(t.Context(), claims.Request{Paths: []string{"core"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return time.Now().Add(time.Hour + time.Minute) }
	if got, err := s.List(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("claims an hour later: %+v, %v", got, err)
	}
}

func TestSurvivesBrokerRestart(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	if _, err := store(t, anc, a).Claim(t.Context(), claims.Request{Paths: []string{"core"}, TTL: time.Hour, Exclusive: true, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	m.Restart()
	bnc, b := agent(t, m, "bob")
	got, err := store(t, bnc, b).List(t.Context())
	if err != nil || len(got) != 1 || got[0].Holder != a.String() || got[0].Reason != "r" {
		t.Fatalf("claims after a restart: %+v, %v", got, err)
	}
}

// TestRaceOneWins: two holders claim the same path exclusively at once; in every round
// exactly one gets it.
func TestRaceOneWins(t *testing.T) {
	m := mesh(t)
	anc, a := agent(t, m, "alice")
	bnc, b := agent(t, m, "bob")
	stores := []*claims.Store{store(t, anc, a), store(t, bnc, b)}
	for round := range 20 {
		path := "f" + string(rune('a'+round))
		var wins sync.WaitGroup
		won := make(chan string, 2)
		for _, s := range stores {
			wins.Go(func() {
				res, err := s.Claim(t.Context(), claims.Request{Paths: []string{path}, TTL: time.Hour, Exclusive: true})
				if err != nil {
					t.Error(err)
				}
				if len(res.Granted) == 1 {
					won <- s.Name
				}
			})
		}
		wins.Wait()
		close(won)
		var names []string
		for n := range won {
			names = append(names, n)
		}
		if len(names) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", round, names)
		}
	}
}
