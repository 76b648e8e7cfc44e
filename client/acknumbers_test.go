package client

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
)

func TestAckNumbers(t *testing.T) {
	for _, c := range []struct {
		reply          string
		seq, delivered uint64
		ok             bool
	}{
		{"$JS.ACK.DM_main.dm_local-bob-x.1.42.7.1700000000000000000.3", 42, 1, true},
		{"$JS.ACK._.ACCHASH.DM_main.dm_local-bob-x.2.42.7.1700000000000000000.3.RAND", 42, 2, true},
		{"$JS.ACK.hub.ACCHASH.DM_main.dm.5.18446744073709551615.7.1.0", 18446744073709551615, 5, true},
		{"$JS.ACK.hub.ACCHASH.DM_main.dm.5.9.7.1.0.RAND.more", 9, 5, true},
		{"$JS.ACK.DM_main.dm.1.42.7.1", 0, 0, false},                      // 8 tokens
		{"$JS.ACK.x.DM_main.dm.1.42.7.1.0", 0, 0, false},                  // 10 tokens
		{"$JS.ACK.DM_main.dm.one.42.7.1.0", 0, 0, false},                  // not a number
		{"$JS.ACK.DM_main.dm.1..7.1.0", 0, 0, false},                      // empty
		{"$JS.ACK.DM_main.dm.1.184467440737095516150.7.1.0", 0, 0, false}, // 21 digits
		{"_INBOX.abc.DM_main.dm.1.42.7.1.0", 0, 0, false},
		{"", 0, 0, false},
	} {
		seq, delivered, ok := ackNumbers(c.reply)
		if seq != c.seq || delivered != c.delivered || ok != c.ok {
			t.Errorf("ackNumbers(%q) = %d, %d, %v; want %d, %d, %v", c.reply, seq, delivered, ok, c.seq, c.delivered, c.ok)
		}
	}
}

// The numbers read in place are the JetStream client's, on the ack subjects a real broker
// sends, first deliveries and redeliveries alike.
func TestAckNumbersMatchTheJetStreamClient(t *testing.T) {
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "s.x", []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < 5 { // 3 first deliveries, then 2 redeliveries of the naked ones
		batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			seen++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			seq, delivered, ok := ackNumbers(m.Reply())
			if !ok || seq != md.Sequence.Stream || delivered != md.NumDelivered {
				t.Fatalf("ackNumbers(%q) = %d, %d, %v; the JetStream client reads %d, %d", m.Reply(), seq, delivered, ok, md.Sequence.Stream, md.NumDelivered)
			}
			if gs, gd := copyNumbers(m); gs != seq || gd != delivered {
				t.Fatalf("copyNumbers = %d, %d; want %d, %d", gs, gd, seq, delivered)
			}
			if md.NumDelivered == 1 && md.Sequence.Stream != 2 {
				err = m.Nak()
			} else {
				err = m.Ack()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
	}
}
