package authsvc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// dialBearer connects to f's broker with the sentinel creds and token as (owner, actor).
func (f *laneFixture) dialBearer(owner, actor, token string, opts ...nats.Option) (*nats.Conn, error) {
	c, err := trust.ReadCreds(f.ua.SentinelCreds())
	if err != nil {
		return nil, err
	}
	ibx := userauth.NewInboxName()
	return nats.Connect(f.URL, append([]nats.Option{nats.UserJWTAndSeed(c.JWT, c.Seed), nats.Token(token),
		nats.Name(ibx), nats.CustomInboxPrefix(userauth.InboxPrefix(ibx)), nats.Timeout(deadline), nats.NoReconnect()}, opts...)...)
}

// exchange trades the fake IdP's token for a bearer of actor at the lane's loopback
// exchange.
func (f *laneFixture) exchange(t *testing.T, actor string) exchangewire.Response {
	t.Helper()
	st, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	x, err := (&userauth.Exchanger{URL: st.URL, Cap: st.Cap}).Exchange(t.Context(), exchangewire.Request{IDToken: "idtok", Actor: actor})
	if err != nil {
		t.Fatalf("exchange for %s: %v", actor, err)
	}
	return x
}

// TestBearers: a human's bearer exchanges for an agent bearer that connects and posts; an
// expired bearer and a bearer of another space are refused at connect.
func TestBearers(t *testing.T) {
	f := startLane(t)
	st, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	x := &userauth.Exchanger{URL: st.URL, Cap: st.Cap}
	human, err := x.Exchange(t.Context(), exchangewire.Request{IDToken: "idtok", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := x.Exchange(t.Context(), exchangewire.Request{Owner: human.Owner, Actor: "alice", ActorToken: human.Token})
	if err != nil {
		t.Fatalf("agent exchange: %v", err)
	}
	if agent.ExpiresAt > time.Now().Add(bearer.MaxAgentLifetime+time.Second).UnixMilli() {
		t.Fatalf("agent bearer lives past %s: %d", bearer.MaxAgentLifetime, agent.ExpiresAt)
	}
	nc, err := f.dialBearer(agent.Owner, agent.Actor, agent.Token)
	if err != nil {
		t.Fatalf("agent refused: %v", err)
	}
	me := protocol.Principal{Owner: agent.Owner, Actor: agent.Actor}
	sub, err := nc.SubscribeSync(protocol.ChannelFilter(testSpace, "general"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.ChatSubject(testSpace, me, "general"), []byte("from the agent")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(deadline); err != nil || string(m.Data) != "from the agent" {
		t.Fatalf("agent post not seen: %v", err)
	}
	nc.Close()

	// Expired: issued by the space's own key with a clock ten minutes back.
	iss, err := bearer.Load(f.dir, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	iss.Now = func() time.Time { return time.Now().Add(-10 * time.Minute) }
	old, err := iss.Issue(bearer.Claims{Owner: human.Owner, Actor: "alice", Kind: bearer.KindHuman, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := f.dialBearer(human.Owner, "alice", old); err == nil {
		c.Close()
		t.Fatal("an expired bearer was admitted")
	}

	// Another space's bearer, for the same owner and actor.
	other, err := bearer.Load(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(bearer.Claims{Owner: human.Owner, Actor: "alice", Kind: bearer.KindHuman})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := f.dialBearer(human.Owner, "alice", foreign); err == nil {
		c.Close()
		t.Fatal("a bearer of another space was admitted")
	}
}

// TestSessionOutlivesBearers: a connection kept by a userauth.Session whose bearers live
// eight seconds stays authorized for several lifetimes: it renews ahead of expiry, moves
// onto each new bearer, and keeps receiving its channel throughout.
func TestSessionOutlivesBearers(t *testing.T) {
	f := startLane(t)
	iss, err := bearer.Load(f.dir, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	first := f.exchange(t, "alice")
	// A bearer's life leaves the session a third of it (renewal at two thirds) to fetch
	// the next and move the connection through the callout: seconds, on a loaded machine.
	const bearerLife = 8 * time.Second
	var fetches atomic.Int32
	fetch := func(context.Context) (exchangewire.Response, error) {
		fetches.Add(1)
		tok, err := iss.Issue(bearer.Claims{Owner: first.Owner, Actor: "alice", Kind: bearer.KindHuman, TTL: bearerLife})
		if err != nil {
			return exchangewire.Response{}, err
		}
		c, err := iss.Verify(tok)
		if err != nil {
			return exchangewire.Response{}, err
		}
		return exchangewire.Response{Token: tok, ExpiresAt: c.Expiry.UnixMilli(), Owner: c.Owner, Actor: c.Actor}, nil
	}
	sess, err := userauth.Start(t.Context(), fetch, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := sess.Options(f.ua.SentinelCreds())
	if err != nil {
		t.Fatal(err)
	}
	authErrs := make(chan error, 16)
	nc, err := nats.Connect(f.URL, append(opts, nats.Timeout(deadline), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthorization) {
				authErrs <- err
			}
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go sess.Keep(ctx, nc)

	me := protocol.Principal{Owner: first.Owner, Actor: "alice"}
	sub, err := nc.SubscribeSync(protocol.ChannelFilter(testSpace, "general"))
	if err != nil {
		t.Fatal(err)
	}
	// Past two bearer lifetimes. A core publish is at most once, so one
	// written in the instant the session moves the connection onto a new bearer may be
	// lost with the old socket; each tick is sent again (a new body) until it is seen.
	sent := 0
	for end := time.Now().Add(2*bearerLife + bearerLife/4); time.Now().Before(end); sent++ {
		seen := false
		for try := 0; try < 3 && !seen; try++ {
			body := fmt.Sprintf("tick %d.%d", sent, try)
			if err := nc.Publish(protocol.ChatSubject(testSpace, me, "general"), []byte(body)); err != nil {
				t.Fatalf("publish %d: %v", sent, err)
			}
			for {
				m, err := sub.NextMsg(deadline / 3)
				if err != nil {
					break
				}
				if string(m.Data) == body {
					seen = true
					break
				}
			}
		}
		if !seen {
			t.Fatalf("post %d not seen in three tries (status %s)", sent, nc.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-authErrs:
		t.Fatalf("the broker refused the kept connection: %v", err)
	default:
	}
	if n := fetches.Load(); n < 3 {
		t.Fatalf("%d bearers fetched over two and a quarter lifetimes, want at least 3", n)
	}
	if !nc.IsConnected() {
		t.Fatalf("connection %s at the end", nc.Status())
	}
}
