package client_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// ackWatch subscribes to the acks sent for the space's DM durables and returns them, and
// the connection that watches.
func ackWatch(t *testing.T, url string) (<-chan *nats.Msg, *nats.Conn) {
	t.Helper()
	return acksOn(t, url, "$JS.ACK."+protocol.StreamDM(space)+".>")
}

// acksOn subscribes to what is sent on the ack subjects matching subject, and returns it
// and the connection that watches (closed at cleanup).
func acksOn(t *testing.T, url, subject string) (<-chan *nats.Msg, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	acks := make(chan *nats.Msg, 256)
	if _, err := nc.ChanSubscribe(subject, acks); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return acks, nc
}

// unacked waits for the next message on ep and returns it unsettled.
func unacked(t *testing.T, ep *client.Endpoint) *client.Incoming {
	t.Helper()
	select {
	case in := <-ep.Messages():
		return in
	case <-time.After(hangGuard):
		t.Fatalf("%s got no message", ep.Principal())
		return nil
	}
}

// dmTo resolves the agent name from from's endpoint and sends it a DM of text.
func dmTo(t *testing.T, from *client.Endpoint, name, text string) {
	t.Helper()
	target, err := from.Resolve(t.Context(), name)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	if _, err := from.DM(t.Context(), target.Principal, client.Text(text)); err != nil {
		t.Fatalf("DM %s: %v", name, err)
	}
}

// A DM left unread in Messages() past its ack wait is marked in progress, not
// redelivered and acked as a duplicate of itself: that ack told the broker the DM was
// handled while nobody had read it, so a process killed then lost it.
func TestUnreadDMIsKeptFromRedelivery(t *testing.T) {
	url := mesh(t)
	acks, _ := ackWatch(t, url)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob", AckWait: time.Second})
	dmTo(t, alice, "bob", "read me later")
	// Bob does not read. The first word the broker hears about the copy must be that it is
	// in progress: before the keeper it was an ack, a second after the DM arrived.
	select {
	case m := <-acks:
		if string(m.Data) != "+WPI" {
			t.Fatalf("bob's endpoint sent %q for a DM nobody read (%s), want +WPI", m.Data, m.Subject)
		}
	case <-time.After(time.Minute): // the test's own deadline; the keeper ticks every 333 ms
		t.Fatal("bob's endpoint said nothing of the unread DM")
	}
	in := next(t, bob)
	if in.Text() != "read me later" {
		t.Fatalf("bob read %q", in.Text())
	}
}

// logSignal is a slog handler that closes hit at the first record whose message starts
// with prefix, and writes every record to the test's log.
type logSignal struct {
	slog.Handler
	prefix string
	hit    chan struct{}
}

func (h *logSignal) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		select {
		case <-h.hit:
		default:
			close(h.hit)
		}
	}
	return h.Handler.Handle(ctx, r)
}

// unsettledSignal is a debug logger to the test's log whose hit closes when an endpoint
// leaves the redelivery of a copy its application holds to the application's ack.
func unsettledSignal(t *testing.T) *logSignal {
	return &logSignal{Handler: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}),
		prefix: "redelivered copy still unsettled", hit: make(chan struct{})}
}

// redeliverHeld makes the broker redeliver held, the durable copy an application holds,
// as it does when an ack wait runs out (a nak sent on nc), and fails the test when an ack
// passes on acks before the endpoint says (sig) it left the redelivery to the application.
func redeliverHeld(t *testing.T, nc *nats.Conn, held *client.Incoming, acks <-chan *nats.Msg, sig *logSignal) {
	t.Helper()
	if err := nc.Publish(client.AckSubject(held), []byte("-NAK")); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-acks:
			if string(m.Data) == "+ACK" {
				t.Fatalf("the endpoint acked the redelivery (%s) of the copy its application still holds", m.Subject)
			}
		case <-sig.hit:
			return
		case <-time.After(time.Minute): // the test's own deadline
			t.Fatal("the endpoint never handled the redelivery")
		}
	}
}

// A redelivery of a DM the application holds unacked is not acked as a duplicate: the
// application's own Ack settles the DM, and until then a killed process must leave it to
// the next one.
func TestRedeliveryOfAHeldDMIsNotAcked(t *testing.T) {
	url := mesh(t)
	acks, nc := ackWatch(t, url)
	alice := peer(t, url, client.Config{Name: "alice"})
	sig := unsettledSignal(t)
	bob := peer(t, url, client.Config{Name: "bob", AckWait: time.Hour, Logger: slog.New(sig)})
	dmTo(t, alice, "bob", "still mine")
	held := unacked(t, bob)
	redeliverHeld(t, nc, held, acks, sig)
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
}
