package client_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// lateCopyMesh is a space with a delivery daemon whose members' hand-off durables wait
// an hour for an ack: a copy that comes back at all was naked, not redelivered.
type lateCopyMesh struct {
	t  *testing.T
	m  *meshtest.Mesh
	js jetstream.JetStream
}

const lateSpace = "team"

func startLateCopyMesh(t *testing.T) *lateCopyMesh {
	m := meshtest.Start(t, lateSpace)
	js := m.Provision(lateSpace, provision.Options{})
	serveDelivery(t, m, lateSpace)
	return &lateCopyMesh{t: t, m: m, js: js}
}

// mint provisions actor with a hand-off durable of an hour's ack wait.
func (l *lateCopyMesh) mint(actor string) (trust.Creds, protocol.Principal) {
	t := l.t
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	uid := protocol.NewLifecycleUID()
	cfg := provision.HandoffConfig(lateSpace, p, uid)
	cfg.AckWait = time.Hour
	if _, err := l.js.CreateConsumer(t.Context(), protocol.StreamDLV(lateSpace), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Agent(t.Context(), l.js, lateSpace, p, uid, ""); err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(l.m.Mint(lateSpace, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}))
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

// connect opens a session of c; only the test confirms positions (PositionEvery of an hour).
func (l *lateCopyMesh) connect(actor string, c trust.Creds) *client.Endpoint {
	t := l.t
	ep, err := client.Connect(t.Context(), l.m.URL, client.Config{Space: lateSpace, Name: actor, LifecycleUID: c.LifecycleUID,
		PositionEvery: time.Hour, Logger: brokertest.Logger(t)},
		nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return ep
}

// handoff is the hand-off durable of p's incarnation uid.
func (l *lateCopyMesh) handoff(p protocol.Principal, uid string) jetstream.Consumer {
	c, err := l.js.Consumer(l.t.Context(), protocol.StreamDLV(lateSpace), protocol.ConsumerDLV(p, uid))
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

// waitCopies waits until the daemon stored n copies for c that nobody was given yet.
func (l *lateCopyMesh) waitCopies(c jetstream.Consumer, n uint64) {
	meshtest.Until(l.t, "the daemon copies the posts to the hand-off durable", hangGuard, func() bool {
		info, err := c.Info(l.t.Context())
		return err == nil && info.NumPending >= n
	})
}

// fetchOne takes the next copy of c as a session would, without settling it.
func (l *lateCopyMesh) fetchOne(c jetstream.Consumer) jetstream.Msg {
	b, err := c.Fetch(1, jetstream.FetchMaxWait(hangGuard))
	if err != nil {
		l.t.Fatal(err)
	}
	for m := range b.Messages() {
		return m
	}
	l.t.Fatalf("no copy fetched: %v", b.Error())
	return nil
}

// joinedLeft joins carol to general and closes the session: her membership stays, and
// the daemon copies what is posted meanwhile to her hand-off durable.
func (l *lateCopyMesh) joinedLeft(actor string, c trust.Creds) {
	ep := l.connect(actor, c)
	ep.TakeOnAck()
	within(l.t, actor+"'s join", func() error { return ep.Join(l.t.Context(), "general") })
	if ok, why, _ := ep.Backstop("general"); !ok {
		l.t.Fatalf("backstop not established: %s", why)
	}
	if err := ep.Close(); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lateCopyMesh) next(ep *client.Endpoint, what string) *client.Incoming {
	select {
	case in := <-ep.Messages():
		return in
	case <-time.After(hangGuard):
		l.t.Fatalf("%s never reached Messages()", what)
		return nil
	}
}

// TestLateHandoffCopyReachesTheNextSession: a copy given to a session that never settled
// it (killed, or closed with it in flight) comes back to the next session only after its
// ack wait, behind the copies stored after it, which that session has already shown and
// had taken. The late copy must still reach Messages() (it was judged given, being below
// the last copy shown, and acked: the close benchmark's lost first posts of a round), and
// no position the session confirms meanwhile may cover it (a later session would drop it
// as given by the daemon's row).
func TestLateHandoffCopyReachesTheNextSession(t *testing.T) {
	l := startLateCopyMesh(t)
	creds, carol := l.mint("carol")
	l.joinedLeft("carol", creds)

	alice := l.connect("alice", mustCreds(l.mint("alice")))
	within(t, "alice's join", func() error { return alice.Join(t.Context()) })
	var posts []uint64
	for _, text := range []string{"p0", "p1", "p2"} {
		ack, err := alice.Post(t.Context(), "general", client.Text(text))
		if err != nil {
			t.Fatal(err)
		}
		posts = append(posts, ack.Seq)
	}
	dlv := l.handoff(carol, creds.LifecycleUID)
	l.waitCopies(dlv, 3)
	// A session was given p0's copy and died without settling it.
	lost := l.fetchOne(dlv)

	next := l.connect("carol", creds)
	next.TakeOnAck()
	within(t, "carol's next join", func() error { return next.Join(t.Context(), "general") })
	for _, want := range []string{"p1", "p2"} {
		in := l.next(next, want)
		if in.Text() != want || !in.Durable {
			t.Fatalf("carol's next session shown %q (durable %v), want %s's copy", in.Text(), in.Durable, want)
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	position := func() uint64 {
		client.Report(t.Context(), next)
		list, err := next.Memberships(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, ms := range list {
			if ms.Channel == "general" {
				return ms.Position
			}
		}
		t.Fatal("carol has no membership of general")
		return 0
	}
	if at := position(); at >= posts[0] {
		t.Fatalf("carol confirmed position %d while p0's copy (%d) is still out: a later session would drop it", at, posts[0])
	}
	// The ack wait of the dead session's copy ends (an hour here: the nak stands for it).
	if err := lost.Nak(); err != nil {
		t.Fatal(err)
	}
	in := l.next(next, "p0's late copy")
	if in.Text() != "p0" || !in.Durable {
		t.Fatalf("carol's next session shown %q (durable %v), want p0's late copy", in.Text(), in.Durable)
	}
	if at := position(); at >= posts[0] {
		t.Fatalf("carol confirmed position %d before she took p0 (%d)", at, posts[0])
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}
	if at := position(); at != posts[2] {
		t.Fatalf("carol confirmed position %d once she took every copy, want %d", at, posts[2])
	}
}

// TestCopyHandedOverAfterCloseNakedAtOnce: a copy the hand-off consumer hands over after
// Close returned the endpoint's unsettled copies (its drain outlasted the close) is naked
// at once, so it reaches the next session now, not after its ack wait (an hour here).
func TestCopyHandedOverAfterCloseNakedAtOnce(t *testing.T) {
	l := startLateCopyMesh(t)
	creds, carol := l.mint("carol")
	l.joinedLeft("carol", creds)
	closing := l.connect("carol", creds)
	closing.TakeOnAck()
	within(t, "carol's join", func() error { return closing.Join(t.Context(), "general") })

	alice := l.connect("alice", mustCreds(l.mint("alice")))
	within(t, "alice's join", func() error { return alice.Join(t.Context()) })
	if err := closing.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Post(t.Context(), "general", client.Text("late")); err != nil {
		t.Fatal(err)
	}
	dlv := l.handoff(carol, creds.LifecycleUID)
	l.waitCopies(dlv, 1)
	client.HandOver(closing, l.fetchOne(dlv))

	next := l.connect("carol", creds)
	next.TakeOnAck()
	within(t, "carol's next join", func() error { return next.Join(t.Context(), "general") })
	in := l.next(next, "the copy handed over after close (not naked: it waits out its hour)")
	if in.Text() != "late" || !in.Durable {
		t.Fatalf("carol's next session shown %q (durable %v), want the late post's copy", in.Text(), in.Durable)
	}
}

func mustCreds(c trust.Creds, _ protocol.Principal) trust.Creds { return c }

// TestRedeliveryOfAHeldHandoffCopyIsNotAcked: a redelivery of the hand-off copy the
// application holds unsettled is left to the application's ack. Acked as given, it would
// tell the broker the post was handled while nobody had read it.
func TestRedeliveryOfAHeldHandoffCopyIsNotAcked(t *testing.T) {
	l := startLateCopyMesh(t)
	creds, carol := l.mint("carol")
	l.joinedLeft("carol", creds)
	alice := l.connect("alice", mustCreds(l.mint("alice")))
	within(t, "alice's join", func() error { return alice.Join(t.Context()) })
	if _, err := alice.Post(t.Context(), "general", client.Text("p0")); err != nil {
		t.Fatal(err)
	}
	l.waitCopies(l.handoff(carol, creds.LifecycleUID), 1)

	admin := l.js.Conn()
	acks := make(chan *nats.Msg, 64)
	sub, err := admin.ChanSubscribe("$JS.ACK."+protocol.StreamDLV(lateSpace)+".>", acks)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	sig := unsettledSignal(t)
	next, err := client.Connect(t.Context(), l.m.URL, client.Config{Space: lateSpace, Name: "carol", LifecycleUID: creds.LifecycleUID,
		PositionEvery: time.Hour, Logger: slog.New(sig)},
		nats.UserJWTAndSeed(creds.JWT, creds.Seed), nats.CustomInboxPrefix(creds.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	within(t, "carol's next join", func() error { return next.Join(t.Context(), "general") })
	held := l.next(next, "p0's copy")
	if held.Text() != "p0" || !held.Durable {
		t.Fatalf("carol shown %q (durable %v), want p0's hand-off copy", held.Text(), held.Durable)
	}
	redeliverHeld(t, admin, held, acks, sig)
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
}
