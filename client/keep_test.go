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

// ackWatch subscribes to the acks sent for the space's DM durables and returns them.
func ackWatch(t *testing.T, url string) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	acks := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe("$JS.ACK."+protocol.StreamDM(space)+".>", acks); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return acks
}

// A DM left unread in Messages() past its ack wait is marked in progress, not
// redelivered and acked as a duplicate of itself: that ack told the broker the DM was
// handled while nobody had read it, so a process killed then lost it.
func TestUnreadDMIsKeptFromRedelivery(t *testing.T) {
	url := mesh(t)
	acks := ackWatch(t, url)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob", AckWait: time.Second})
	target, err := alice.Resolve(t.Context(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DM(t.Context(), target.Principal, client.Text("read me later")); err != nil {
		t.Fatal(err)
	}
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

// A redelivery of a DM the application holds unacked is not acked as a duplicate: the
// application's own Ack settles the DM, and until then a killed process must leave it to
// the next one.
func TestRedeliveryOfAHeldDMIsNotAcked(t *testing.T) {
	url := mesh(t)
	acks := ackWatch(t, url)
	alice := peer(t, url, client.Config{Name: "alice"})
	sig := &logSignal{Handler: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}),
		prefix: "redelivered copy still unsettled", hit: make(chan struct{})}
	bob := peer(t, url, client.Config{Name: "bob", AckWait: time.Hour, Logger: slog.New(sig)})
	target, err := alice.Resolve(t.Context(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.DM(t.Context(), target.Principal, client.Text("still mine")); err != nil {
		t.Fatal(err)
	}
	var held *client.Incoming
	select {
	case held = <-bob.Messages():
	case <-time.After(20 * time.Second):
		t.Fatal("bob got no message")
	}
	// Make the broker redeliver the copy bob holds, as it does when an ack wait runs out.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(client.AckSubject(held), []byte("-NAK")); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-acks:
			if string(m.Data) == "+ACK" {
				t.Fatalf("bob's endpoint acked the redelivery (%s) of the DM its application still holds", m.Subject)
			}
			continue
		case <-sig.hit:
		case <-time.After(time.Minute):
			t.Fatal("bob's endpoint never handled the redelivery")
		}
		break
	}
	if err := held.Ack(); err != nil {
		t.Fatal(err)
	}
}
