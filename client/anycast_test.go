package client_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
// role's ack wait ends (here 3 s: the holder's client, starved on a loaded machine, must
// still report progress on the ask in hand within it, or that ask comes back early). A holder that queued asks ahead of its application
// stranded them all until the ack wait, and they came back redelivered.
func TestDeadHolderStrandsOnlyTheAskInHand(t *testing.T) {
	const asks = 10
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	dead := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: 3 * time.Second})
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

// heldByOneHolder fails the test unless role worker's durable (read from alice's
// endpoint) delivered n asks, each once and each still waiting for its ack, and other, a
// second holder, got none of them.
func heldByOneHolder(t *testing.T, alice, other *client.Endpoint, n int) {
	t.Helper()
	c, err := alice.JetStream().Consumer(t.Context(), "TASK_main", "svc_worker")
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.NumRedelivered != 0 || info.Delivered.Consumer != uint64(n) || info.NumAckPending != n {
		t.Fatalf("held asks: %d redelivered, %d deliveries, %d pending ack; want 0, %d, %d",
			info.NumRedelivered, info.Delivered.Consumer, info.NumAckPending, n, n)
	}
	select {
	case in := <-other.Messages():
		t.Fatalf("another holder got %q (delivery %d) while the first still worked on it", in.Text(), in.Delivered)
	default:
	}
}

// TestHeldAskIsExtendedWhileTheHolderWorks: a holder that keeps an ask past the role's
// ack wait without acking it tells the broker it is still working on it, so the ask is
// not redelivered to another holder.
func TestHeldAskIsExtendedWhileTheHolderWorks(t *testing.T) {
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	busy := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: 2 * time.Second})
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
	heldByOneHolder(t, alice, other, 1)
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "an empty work queue", hangGuard, func() bool { return streamMsgs(t, alice, "TASK_main") == 0 })
}

// roleAcks subscribes to what is sent on the ack subjects of role worker's durable, and
// returns it and the connection that watches.
func roleAcks(t *testing.T, url string) (<-chan *nats.Msg, *nats.Conn) {
	t.Helper()
	return acksOn(t, url, "$JS.ACK.TASK_main.svc_worker.>")
}

// Asks taken at once with TakeAsks are kept like the one the endpoint takes by itself:
// held past the role's ack wait, each is marked in progress and none reaches another
// holder.
func TestAsksTakenAtOnceAreKeptWhileHeld(t *testing.T) {
	url := mesh(t)
	acks, _ := roleAcks(t, url)
	var mu sync.Mutex
	wpi := map[string]int{} // +WPI sent, by ack subject
	go func() {
		for m := range acks {
			if strings.HasPrefix(string(m.Data), "+WPI") {
				mu.Lock()
				wpi[m.Subject]++
				mu.Unlock()
			}
		}
	}()
	alice := peer(t, url, client.Config{Name: "alice"})
	w := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: 2 * time.Second})
	askN(t, alice, "worker", "a", 3)
	held := []*client.Incoming{unacked(t, w)} // the one the endpoint took by itself
	meshtest.Until(t, "two asks wait for the role", hangGuard, func() bool {
		n, err := w.RoleBacklog(t.Context())
		return err == nil && n == 2
	})
	taken, err := w.TakeAsks(t.Context(), 2)
	if err != nil || len(taken) != 2 {
		t.Fatalf("took %d asks, %v; want 2", len(taken), err)
	}
	held = append(held, taken...)
	other := peer(t, url, client.Config{Name: "w2", Role: "worker"})
	// Four reports for each, one every third of the ack wait: the wait has passed since
	// the take.
	meshtest.Until(t, "four progress reports for every held ask", hangGuard, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, in := range held {
			if wpi[client.AckSubject(in)] < 4 {
				return false
			}
		}
		return true
	})
	heldByOneHolder(t, alice, other, 3)
	for _, in := range held {
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Until(t, "an empty work queue", hangGuard, func() bool { return streamMsgs(t, alice, "TASK_main") == 0 })
}

// A redelivery of an ask the application holds unacked, pulled by the same holder, is
// not acked as a duplicate of itself (that told the broker the ask was done while its
// holder still worked on it, so a holder killed then lost it), and it frees the slot it
// was pulled into: the holder goes on taking asks.
func TestRedeliveryOfAHeldAskIsNotAcked(t *testing.T) {
	url := mesh(t)
	acks, nc := roleAcks(t, url)
	alice := peer(t, url, client.Config{Name: "alice"})
	sig := unsettledSignal(t)
	w := peer(t, url, client.Config{Name: "w1", Role: "worker", AskAckWait: time.Hour, MaxAsks: 2, Logger: slog.New(sig)})
	askN(t, alice, "worker", "a", 1)
	held := unacked(t, w)
	// w has a free slot, so its own pull takes the redelivery.
	redeliverHeld(t, nc, held, acks, sig)
	askN(t, alice, "worker", "b", 1)
	if in := next(t, w); in.Text() != "b0" {
		t.Fatalf("the holder took %q, want b0", in.Text())
	}
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "an empty work queue", hangGuard, func() bool { return streamMsgs(t, alice, "TASK_main") == 0 })
}
