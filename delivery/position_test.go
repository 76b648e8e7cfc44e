package delivery

import (
	"fmt"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// TestLaggingCopiesPastTheIDWindowShownOnce: while the daemon is down a member reads
// posts of a durable channel live, then more posts (of a live channel) than the
// receiver's id window holds; the copies the daemon then owes of the durable posts are
// skipped or dropped by position (each was read live), none is shown again, in order, and
// a rejoin with nothing new posted shows nothing.
func TestLaggingCopiesPastTheIDWindowShownOnce(t *testing.T) {
	const n, window = 300, 8192
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	m.setChannel("random", `{"replay":false,"deliveryClass":"live"}`)
	d1 := serve(t, m.lane())
	bobCreds := m.agent("bob", "general", "random")
	bob := m.endpoint(bobCreds)
	for _, ch := range []string{"general", "random"} {
		if err := bob.JoinChannel(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := d1.stop(t); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general", "random"))
	done := make(chan error, 1)
	go func() {
		postTexts(t, alice, 0, n)
		for i := range window {
			if _, err := alice.Post(t.Context(), "random", client.Text(fmt.Sprintf("noise %d", i))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// Each channel's posts come in order; the two subscriptions interleave freely.
	next := map[string]int{}
	for range n + window {
		in := clienttest.Receive(t, bob, deadline)
		ch := in.Subject.Channel
		want := text(next[ch])
		if ch == "random" {
			want = fmt.Sprintf("noise %d", next[ch])
		}
		if in.Durable || in.Text() != want {
			t.Fatalf("%s message %d: durable %v %q, want live %q", ch, next[ch], in.Durable, in.Text(), want)
		}
		next[ch]++
	}
	if next["general"] != n || next["random"] != window {
		t.Fatalf("read %v, want %d general and %d random", next, n, window)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	serve(t, m.lane()) // the backstop catches up on general: every post bob read live
	fan, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "every post passed by the fan-out", deadline, func() bool {
		info, err := fan.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	cons, err := m.js.Consumer(t.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's hand-off drained, nothing shown again", deadline, func() bool {
		select {
		case in := <-bob.Messages():
			t.Fatalf("shown again: %q (durable %v)", in.Text(), in.Durable)
		default:
		}
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	t.Logf("copies made for bob: %d of %d", m.stored("bob"), n)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	postTexts(t, alice, n, n+1) // a marker: the first thing bob is shown must be it
	if in := clienttest.Receive(t, bob, deadline); in.Text() != text(n) {
		t.Fatalf("rejoined bob shown %q (durable %v), want only the new %q", in.Text(), in.Durable, text(n))
	}
}

// TestConnectedMemberSkippedOfflineMemberGetsEveryPost: carol reads a durable channel
// live while bob is offline; the fan-out defers carol's copies until her confirmed
// position covers them and makes none, while bob is copied every post: on his return he
// is shown each once and in order, and carol was shown each once.
func TestConnectedMemberSkippedOfflineMemberGetsEveryPost(t *testing.T) {
	const n = 100
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	l := m.lane()
	l.PositionGrace = deadline // only a hang guard: carol's positions decide
	serve(t, l)
	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	carol := m.endpoint(m.agent("carol", "general"))
	if err := carol.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := carol.Backstop("general"); !ok {
		t.Fatalf("carol's backstop: %s", why)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	posted := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := alice.Post(t.Context(), "general", client.Text(text(i))); err != nil {
				posted <- err
				return
			}
		}
		posted <- nil
	}()
	for i := range n {
		if in := clienttest.Receive(t, carol, deadline); in.Durable || in.Text() != text(i) {
			t.Fatalf("carol's message %d: durable %v %q, want live %q", i, in.Durable, in.Text(), text(i))
		}
	}
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	fan, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "every post passed by the fan-out", deadline, func() bool {
		info, err := fan.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= n
	})
	if got := m.stored("carol"); got != 0 {
		t.Fatalf("%d copies made for carol, who read every post live; want 0", got)
	}
	if got := m.stored("bob"); got != n {
		t.Fatalf("%d copies made for offline bob, want %d", got, n)
	}
	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		in := clienttest.Receive(t, bob, deadline)
		if !in.Durable || in.Text() != text(i) {
			t.Fatalf("bob's message %d: durable %v %q, want durable %q", i, in.Durable, in.Text(), text(i))
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	postTexts(t, alice, n, n+1) // a marker: nothing may come before it
	for _, ep := range []*client.Endpoint{bob, carol} {
		if in := clienttest.Receive(t, ep, deadline); in.Text() != text(n) {
			t.Fatalf("%s shown %q (durable %v), want only the marker %q", ep.Principal(), in.Text(), in.Durable, text(n))
		}
	}
}

// TestUnreadLivePostsAtCloseComeBack: bob reads two posts, then three more reach his
// inbox live but he closes before taking them; his next session is given those three as
// hand-off copies, in order, and not the two he read.
func TestUnreadLivePostsAtCloseComeBack(t *testing.T) {
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	serve(t, m.lane())
	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 2)
	for i := range 2 {
		if in := clienttest.Receive(t, bob, deadline); in.Text() != text(i) {
			t.Fatalf("message %d: %q", i, in.Text())
		}
	}
	s, err := m.js.Stream(t.Context(), protocol.StreamChat(space))
	if err != nil {
		t.Fatal(err)
	}
	read := s.CachedInfo().State.LastSeq
	meshtest.Until(t, "bob's position covers what he read", deadline, func() bool {
		list, err := bob.Memberships(t.Context())
		return err == nil && len(list) == 1 && list[0].Position >= read
	})
	postTexts(t, alice, 2, 5) // reach bob's inbox live; he never takes them
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 5; i++ {
		in := clienttest.Receive(t, bob, deadline)
		if !in.Durable || in.Text() != text(i) {
			t.Fatalf("next session's message %d: durable %v %q, want durable %q", i, in.Durable, in.Text(), text(i))
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	postTexts(t, alice, 5, 6)
	if in := clienttest.Receive(t, bob, deadline); in.Text() != text(5) {
		t.Fatalf("shown %q (durable %v), want only the marker %q", in.Text(), in.Durable, text(5))
	}
}

// TestCopiesInHandAtCloseComeBackAtOnceInOrder: bob returns to 50 hand-off copies with
// room for one message in Messages(), takes the first and closes while the others are
// delivered to him unacked (one queued, one in the handler, the rest in the consumer's
// buffer). His next session is given every one of them at once (not after the 60 s ack
// wait) and in order.
func TestCopiesInHandAtCloseComeBackAtOnceInOrder(t *testing.T) {
	const n = 50
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	serve(t, m.lane())
	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, n)
	meshtest.Until(t, "every copy stored", deadline, func() bool { return m.stored("bob") == n })

	bob = m.endpointInbox(bobCreds, 1)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if in := clienttest.Receive(t, bob, deadline); !in.Durable || in.Text() != text(0) {
		t.Fatalf("first copy: durable %v %q, want durable %q", in.Durable, in.Text(), text(0))
	} else if err := in.Ack(); err != nil {
		t.Fatal(err)
	}
	cons, err := m.js.Consumer(t.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the other copies delivered to bob, unacked", deadline, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == n-1
	})
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}

	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		in := clienttest.Receive(t, bob, deadline) // within deadline, well inside the ack wait
		if !in.Durable || in.Text() != text(i) {
			t.Fatalf("next session's message %d: durable %v %q, want durable %q", i, in.Durable, in.Text(), text(i))
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	postTexts(t, alice, n, n+1)
	if in := clienttest.Receive(t, bob, deadline); in.Text() != text(n) {
		t.Fatalf("shown %q (durable %v), want only the marker %q", in.Text(), in.Durable, text(n))
	}
}
