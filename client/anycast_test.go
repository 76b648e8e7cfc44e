package client_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// askN asks role n numbered texts ("<prefix>0"...) from ep.
func askN(t *testing.T, ep *client.Endpoint, role, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := ep.Ask(t.Context(), role, client.Text(fmt.Sprintf("%s%d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeadHolderStrandsOnlyTheAskInHand: a holder takes one ask at a time, so when it
// dies with more asks queued, a live holder gets every other ask on its first delivery
// (they never sat in the dead holder's hands), and the one the dead holder held once the
// role's (here 1 s) ack wait ends. A holder that queued asks ahead of its application
// stranded them all until the ack wait, and they came back redelivered.
func TestDeadHolderStrandsOnlyTheAskInHand(t *testing.T) {
	const asks = 10
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	dead := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: time.Second})
	askN(t, alice, "worker", "a", asks)
	var held *client.Incoming
	select {
	case held = <-dead.Messages():
	case <-time.After(hangGuard):
		t.Fatal("the first holder got no ask")
	}
	// Let the holder's client pull whatever it would pull on its own: the role's queue
	// must still hold every ask but the one in hand.
	meshtest.Until(t, "the other asks still queued for the role", hangGuard, func() bool {
		c, err := alice.JetStream().Consumer(t.Context(), "TASK_main", "svc_worker")
		if err != nil {
			return false
		}
		info := c.CachedInfo()
		return info.NumPending == asks-1 && info.NumAckPending == 1
	})
	dead.Conn().Close() // dies without acking what it holds

	live := peer(t, url, client.Config{Name: "w2", Role: "worker"})
	got := map[string]uint64{}
	for range asks {
		in := next(t, live)
		if _, twice := got[in.Text()]; twice {
			t.Fatalf("ask %q surfaced twice", in.Text())
		}
		got[in.Text()] = in.Delivered
	}
	for text, delivered := range got {
		want := uint64(1)
		if text == held.Text() {
			want = 2 // the stranded one, after the ack wait
		}
		if delivered != want {
			t.Errorf("ask %q reached the live holder on delivery %d, want %d (held by the dead holder: %q)", text, delivered, want, held.Text())
		}
	}
}

// TestHeldAskIsExtendedWhileTheHolderWorks: a holder that keeps an ask past the role's
// ack wait without acking it tells the broker it is still working on it, so the ask is
// not redelivered to another holder.
func TestHeldAskIsExtendedWhileTheHolderWorks(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	busy := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: time.Second})
	// Count the holder's progress reports on the durable's ack subjects.
	var wpi atomic.Int32
	spy, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	if _, err := spy.Subscribe("$JS.ACK.TASK_main.svc_worker.>", func(m *nats.Msg) {
		if strings.HasPrefix(string(m.Data), "+WPI") {
			wpi.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	askN(t, alice, "worker", "job", 1)
	var held *client.Incoming
	select {
	case held = <-busy.Messages():
	case <-time.After(hangGuard):
		t.Fatal("the holder got no ask")
	}
	other := peer(t, url, client.Config{Name: "w2", Role: "worker"})
	// Four reports, one every third of the ack wait: the wait has passed since the take.
	meshtest.Until(t, "four progress reports", hangGuard, func() bool { return wpi.Load() >= 4 })
	c, err := alice.JetStream().Consumer(t.Context(), "TASK_main", "svc_worker")
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.NumRedelivered != 0 || info.Delivered.Consumer != 1 || info.NumAckPending != 1 {
		t.Fatalf("held ask: %d redelivered, %d deliveries, %d pending ack; want 0, 1, 1", info.NumRedelivered, info.Delivered.Consumer, info.NumAckPending)
	}
	select {
	case in := <-other.Messages():
		t.Fatalf("another holder got %q (delivery %d) while the first still worked on it", in.Text(), in.Delivered)
	default:
	}
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "an empty work queue", hangGuard, func() bool { return streamMsgs(t, alice, "TASK_main") == 0 })
}
