package delivery

import (
	"fmt"
	"testing"

	"github.com/cotal-ai/cotal/client"
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
	for i := range n + window {
		in := receive(t, bob)
		want := text(i)
		if i >= n {
			want = fmt.Sprintf("noise %d", i-n)
		}
		if in.Durable || in.Text() != want {
			t.Fatalf("message %d: durable %v %q, want live %q", i, in.Durable, in.Text(), want)
		}
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
	if in := receive(t, bob); in.Text() != text(n) {
		t.Fatalf("rejoined bob shown %q (durable %v), want only the new %q", in.Text(), in.Durable, text(n))
	}
}
