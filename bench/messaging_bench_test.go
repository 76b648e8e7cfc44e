package bench

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

const (
	space    = "bench"
	messages = 20000 // per measured round
	text     = "the quick brown fox jumps over the lazy dog, twice over, for a realistic size"
)

// setup starts a broker with a provisioned space and returns its URL.
func setup(b *testing.B) string {
	b.Helper()
	srv := brokertest.Start(b)
	nc := dial(b, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := provision.Space(b.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		b.Fatal(err)
	}
	return srv.ClientURL()
}

func dial(b *testing.B, url string) *nats.Conn {
	b.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

func endpoint(b *testing.B, url, name string) *client.Endpoint {
	b.Helper()
	ep, err := client.Connect(b.Context(), url, client.Config{Space: space, Name: name, InboxSize: 4096})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ep.Close() })
	return ep
}

// payload is a raw body the size of a cotal envelope carrying text.
func payload(b *testing.B, ep *client.Endpoint) []byte {
	m := ep.Envelope(client.Text(text))
	m.Channel = "general"
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// rate times f, which moves n messages, and returns messages per second.
func rate(b *testing.B, n int, f func()) float64 {
	b.Helper()
	start := time.Now()
	f()
	return float64(n) / time.Since(start).Seconds()
}

func await(b *testing.B, done <-chan struct{}, what string) {
	b.Helper()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("timed out: %s", what)
	}
}

// BenchmarkMulticast compares a cotal channel post (JetStream publish with a message id,
// received through a joined endpoint with the receive checks) against a raw nats.go publish
// of a same-sized body to the same subject, received by a raw subscription (cotal/raw), and
// against a raw JetStream async publish with a message id (cotal/raw-js): the same
// guarantee cotal gives, that the broker stored each post.
func BenchmarkMulticast(b *testing.B) {
	url := setup(b)
	alice := endpoint(b, url, "alice")
	bob := endpoint(b, url, "bob")
	if err := bob.Join(b.Context(), "general"); err != nil {
		b.Fatal(err)
	}
	subject := protocol.ChatSubject(space, alice.Principal(), "general")
	body := payload(b, alice)
	rawPub, rawSub := dial(b, url), dial(b, url)

	rawJS, err := jetstream.New(rawPub)
	if err != nil {
		b.Fatal(err)
	}
	var raw, rawAcked, cotal float64
	it := 0
	for b.Loop() {
		it++
		if st, err := rawJS.Stream(b.Context(), protocol.StreamChat(space)); err == nil {
			i := st.CachedInfo().State
			b.Logf("DEBUG it=%d chat msgs=%d bytes=%d raw=%.0f rawjs=%.0f cotal=%.0f t=%s", it, i.Msgs, i.Bytes, raw, rawAcked, cotal, time.Now().Format("15:04:05.000"))
		}
		raw = rate(b, messages, func() {
			rawMulticast(b, rawSub, func(int) error { return rawPub.Publish(subject, body) })
		})
		rawAcked = rate(b, messages, func() {
			rawMulticast(b, rawSub, func(i int) error {
				msg := nats.NewMsg(subject)
				msg.Data = body
				msg.Header.Set(jetstream.MsgIDHeader, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(i))
				_, err := rawJS.PublishMsgAsync(msg)
				return err
			})
			await(b, rawJS.PublishAsyncComplete(), "raw publish acks")
		})
		cotal = rate(b, messages, func() {
			go func() {
				for range messages {
					m := alice.Envelope(client.Text(text))
					m.Channel = "general"
					if _, err := alice.PublishAsync(subject, m); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			for range messages {
				select {
				case <-bob.Messages():
				case <-time.After(time.Minute):
					b.Fatal("cotal multicast: bob got too few")
				}
			}
			await(b, alice.JetStream().PublishAsyncComplete(), "cotal publish acks")
		})
	}
	report(b, raw, cotal)
	b.ReportMetric(rawAcked, "raw-js-msgs/s")
	b.ReportMetric(cotal/rawAcked, "cotal/raw-js")
}

// rawMulticast subscribes raw to the channel, publishes messages with publish and waits
// until all have arrived.
func rawMulticast(b *testing.B, sub *nats.Conn, publish func(i int) error) {
	done := make(chan struct{})
	n := 0
	s, err := sub.Subscribe(protocol.ChannelFilter(space, "general"), func(*nats.Msg) {
		if n++; n == messages {
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Unsubscribe()
	if err := s.SetPendingLimits(-1, -1); err != nil {
		b.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	for i := range messages {
		if err := publish(i); err != nil {
			b.Fatal(err)
		}
	}
	await(b, done, "raw multicast")
}

// BenchmarkDM compares a cotal DM round (publish, receive through the DM durable, ack)
// against a raw JetStream publish to the same subject consumed by a raw durable with acks.
func BenchmarkDM(b *testing.B) {
	url := setup(b)
	alice := endpoint(b, url, "alice")
	bob := endpoint(b, url, "bob")
	if err := bob.Join(b.Context()); err != nil {
		b.Fatal(err)
	}
	subject := protocol.InstSubject(space, bob.Principal(), alice.Principal())
	body := payload(b, alice)

	rawNC := dial(b, url)
	js, err := jetstream.New(rawNC)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	cons, err := js.CreateConsumer(ctx, protocol.StreamDM(space), jetstream.ConsumerConfig{
		Durable: "raw_bench", FilterSubject: protocol.InstSubject(space, protocol.Principal{Owner: "local", Actor: "carol"}, alice.Principal()),
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	rawSubject := strings.Replace(subject, ".bob.", ".carol.", 1)

	var raw, cotal float64
	it := 0
	for b.Loop() {
		it++
		if st, err := js.Stream(b.Context(), protocol.StreamDM(space)); err == nil {
			i := st.CachedInfo().State
			b.Logf("DEBUG it=%d dm msgs=%d bytes=%d raw=%.0f cotal=%.0f t=%s", it, i.Msgs, i.Bytes, raw, cotal, time.Now().Format("15:04:05.000"))
		}
		raw = rate(b, messages, func() {
			done := make(chan struct{})
			n := 0
			cc, err := cons.Consume(func(m jetstream.Msg) {
				if err := m.Ack(); err != nil {
					b.Error(err)
				}
				if n++; n == messages {
					close(done)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			for i := range messages {
				msg := nats.NewMsg(rawSubject)
				msg.Data = body
				msg.Header.Set(jetstream.MsgIDHeader, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(i))
				if _, err := js.PublishMsgAsync(msg); err != nil {
					b.Fatal(err)
				}
			}
			await(b, done, "raw dm")
			await(b, js.PublishAsyncComplete(), "raw publish acks")
			cc.Stop()
		})
		cotal = rate(b, messages, func() {
			go func() {
				for range messages {
					m := alice.Envelope(client.Text(text))
					m.To = bob.Principal().String()
					if _, err := alice.PublishAsync(subject, m); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			for range messages {
				select {
				case in := <-bob.Messages():
					if err := in.Ack(); err != nil {
						b.Error(err)
					}
				case <-time.After(time.Minute):
					b.Fatal("cotal dm: bob got too few")
				}
			}
			await(b, alice.JetStream().PublishAsyncComplete(), "cotal publish acks")
		})
	}
	report(b, raw, cotal)
}

func report(b *testing.B, raw, cotal float64) {
	b.ReportMetric(raw, "raw-msgs/s")
	b.ReportMetric(cotal, "cotal-msgs/s")
	b.ReportMetric(cotal/raw, "cotal/raw")
}
