package delivery

import (
	"testing"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// TestLaggingCopiesPastTheIDWindowShownOnce: a member reads more posts live than the
// receiver's id window holds while the daemon is down; the copies the daemon then makes
// of every one of them are dropped by position (each post was read live), none is shown
// again, and a rejoin with nothing new posted shows nothing.
func TestLaggingCopiesPastTheIDWindowShownOnce(t *testing.T) {
	const n = 8192 + 300
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	d1 := serve(t, m.lane())
	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := d1.stop(t); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		postTexts(t, alice, 0, n)
	}()
	for i := range n {
		if in := receive(t, bob); in.Durable || in.Text() != text(i) {
			t.Fatalf("message %d: durable %v %q, want live %q", i, in.Durable, in.Text(), text(i))
		}
	}
	<-done
	serve(t, m.lane()) // the backstop catches up: n copies, each of a post bob read live
	fan, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "every post copied", deadline, func() bool {
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
		if err == nil {
			t.Logf("pending %d ackpending %d floor %d delivered %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, info.Delivered.Stream)
		}
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream > 0
	})
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	postTexts(t, alice, n, n+1) // a marker: the first thing bob is shown must be it
	if in := receive(t, bob); in.Text() != text(n) {
		t.Fatalf("rejoined bob shown %q (durable %v), want only the new %q", in.Text(), in.Durable, text(n))
	}
}
