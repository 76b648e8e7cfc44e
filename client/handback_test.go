package client_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
)

// A DM an application hands back before Close reaches the next incarnation at once,
// however late the JetStream library unsubscribes the DM consumer after Stop (it does so
// on a goroutine of its own, which a loaded machine may run late). A copy naked while
// the closing endpoint's pull request still listened would be redelivered to it, and
// dropped there (back only after the ack wait) or acked as a duplicate of the copy it
// handed back (lost). The durable's ack wait is far longer than the test waits, so a DM
// that comes back at all was handed back.
func TestHandedBackDMReachesTheNextIncarnationHoweverLateTheConsumerUnsubscribes(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "bob", AckWait: time.Hour,
		DeliveryTimeout: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close() })
	client.UnsubscribeLate(bob, time.Second)
	bob.TakeOnAck()
	if err := bob.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	dmTo(t, alice, "bob", "hand me back")
	held := unacked(t, bob)
	bob.HandBack(held)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	next := peer(t, url, client.Config{Name: "bob", AckWait: time.Hour})
	select {
	case in := <-next.Messages():
		if in.Text() != "hand me back" || in.ID != held.ID {
			t.Fatalf("the next incarnation got %q (%s), want the handed-back DM", in.Text(), in.ID)
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // the test's own deadline; the ack wait is an hour
		t.Fatal("the handed-back DM never came back: it was naked while the closing endpoint still listened")
	}
}
