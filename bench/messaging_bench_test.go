package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cputime"
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

// meter sums one kind of round over the iterations, so that its rate is the mean over
// all of them rather than the last one's. It also sums the CPU time the process spent
// (broker included), which other work on a shared machine disturbs far less than the
// wall time.
type meter struct {
	n   int
	d   time.Duration
	cpu time.Duration
}

// measure times f, which moves n messages; n 0 skips f (see side).
func (m *meter) measure(n int, f func()) {
	if n == 0 {
		return
	}
	cpu := processCPU()
	start := time.Now()
	f()
	m.d += time.Since(start)
	m.cpu += processCPU() - cpu
	m.n += n
}

// side returns messages, or 0 when COTAL_BENCH_SIDE names another side than name ("raw"
// or "cotal"): a CPU profile of one side alone then shows what it costs (the ratios of
// such a run are meaningless).
func side(name string) int {
	if s := os.Getenv("COTAL_BENCH_SIDE"); s != "" && s != name {
		return 0
	}
	return messages
}

// rate is messages per second over the timed rounds.
func (m *meter) rate() float64 { return float64(m.n) / m.d.Seconds() }

// cpuPerMsg is the process's CPU time per message over the timed rounds.
func (m *meter) cpuPerMsg() time.Duration { return m.cpu / time.Duration(max(m.n, 1)) }

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	d, err := cputime.Process()
	if err != nil {
		return 0
	}
	return d
}

// roundTimeout bounds one measured round.
const roundTimeout = time.Minute

// ackWindow bounds the async publishes awaiting their ack. The JetStream client holds at
// most 4000 and fails a publish that stalls 200ms at that cap, so a sender that outruns
// the broker through one hiccup would fail; waiting for the oldest ack paces it instead.
const ackWindow = 1000

// publishAll sends n messages with publish, at most ackWindow unacked at a time, and
// returns once the broker has acked (stored) every one, or at the first error.
func publishAll(ctx context.Context, n int, publish func(i int) (jetstream.PubAckFuture, error)) error {
	ring := make([]jetstream.PubAckFuture, ackWindow)
	for i := range n {
		slot := &ring[i%ackWindow]
		if *slot != nil {
			if err := acked(ctx, *slot); err != nil {
				return err
			}
		}
		f, err := publish(i)
		if err != nil {
			return err
		}
		*slot = f
	}
	for _, f := range ring {
		if f != nil {
			if err := acked(ctx, f); err != nil {
				return err
			}
		}
	}
	return nil
}

func acked(ctx context.Context, f jetstream.PubAckFuture) error {
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return fmt.Errorf("publish ack: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("publish ack: %w", ctx.Err())
	}
}

func await(ctx context.Context, b *testing.B, done <-chan struct{}, what string) {
	b.Helper()
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("timed out: %s", what)
	}
}

// purge empties the named streams, with the timer stopped, so that every round starts
// from the same state: the DM stream keeps every message and would grow by each round.
// The broker's duplicate window keeps recent message ids across a purge; over 20 rounds
// that showed no drift in the rates.
func purge(b *testing.B, js jetstream.JetStream, streams ...string) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for _, name := range streams {
		s, err := js.Stream(b.Context(), name)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Purge(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// cotalRound publishes messages from alice with send, from a goroutine, while bob receives
// them (acking each if ack); it returns once bob has every message and the broker has
// acked every publish. A send error ends the benchmark at once.
func cotalRound(b *testing.B, bob *client.Endpoint, ack bool, send func() (jetstream.PubAckFuture, error)) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), roundTimeout)
	defer cancel() // stops the sender if the round fails
	sent := make(chan error, 1)
	go func() { sent <- publishAll(ctx, messages, func(int) (jetstream.PubAckFuture, error) { return send() }) }()
	for got := 0; got < messages; {
		select {
		case in := <-bob.Messages():
			got++
			if ack {
				if err := in.Ack(); err != nil {
					b.Fatal(err)
				}
			}
		case err := <-sent:
			if err != nil {
				b.Fatalf("cotal send: %v", err)
			}
			sent = nil // all stored; bob still has some to receive
		case <-ctx.Done():
			b.Fatalf("cotal: bob got %d of %d", got, messages)
		}
	}
	if sent != nil {
		if err := <-sent; err != nil {
			b.Fatalf("cotal send: %v", err)
		}
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
	// The raw rounds post to a channel of the same stream that bob has not joined: on
	// general bob's endpoint would receive them too, so the raw side would pay part of
	// cotal's receive path and one of its posts (a fixed id) would reach bob's inbox.
	rawSubject := protocol.ChatSubject(space, alice.Principal(), rawChannel)
	body := payload(b, alice)
	rawPub, rawSub := dial(b, url), dial(b, url)

	rawJS, err := jetstream.New(rawPub)
	if err != nil {
		b.Fatal(err)
	}
	chat := protocol.StreamChat(space)
	var raw, rawAcked, cotal meter
	for b.Loop() {
		purge(b, rawJS, chat)
		raw.measure(messages, func() {
			rawMulticast(b, rawSub, func(context.Context) error {
				for range messages {
					if err := rawPub.Publish(rawSubject, body); err != nil {
						return err
					}
				}
				return nil
			})
		})
		purge(b, rawJS, chat)
		rawAcked.measure(messages, func() {
			rawMulticast(b, rawSub, func(ctx context.Context) error {
				return publishAll(ctx, messages, func(i int) (jetstream.PubAckFuture, error) {
					msg := nats.NewMsg(rawSubject)
					msg.Data = body
					msg.Header.Set(jetstream.MsgIDHeader, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(i))
					return rawJS.PublishMsgAsync(msg)
				})
			})
		})
		purge(b, rawJS, chat)
		cotal.measure(messages, func() {
			cotalRound(b, bob, false, func() (jetstream.PubAckFuture, error) {
				m := alice.Envelope(client.Text(text))
				m.Channel = "general"
				return alice.PublishAsync(subject, m)
			})
		})
	}
	report(b, &raw, &cotal)
	b.ReportMetric(rawAcked.rate(), "raw-js-msgs/s")
	b.ReportMetric(cotal.rate()/rawAcked.rate(), "cotal/raw-js")
	b.ReportMetric(float64(rawAcked.cpuPerMsg())/float64(cotal.cpuPerMsg()), "cotal/raw-js-cpu")
}

// rawChannel is the channel the raw multicast rounds use: one no endpoint joins.
const rawChannel = "rawbench"

// rawMulticast subscribes raw to rawChannel, sends the messages with send and waits
// until all have arrived.
func rawMulticast(b *testing.B, sub *nats.Conn, send func(ctx context.Context) error) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), roundTimeout)
	defer cancel()
	done := make(chan struct{})
	n := 0
	s, err := sub.Subscribe(protocol.ChannelFilter(space, rawChannel), func(*nats.Msg) {
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
	if err := send(ctx); err != nil {
		b.Fatal(err)
	}
	await(ctx, b, done, "raw multicast")
}

// BenchmarkDM compares a cotal DM round (publish, receive through the DM durable, ack)
// against a raw JetStream publish to the same subject consumed by a raw durable with acks.
// As alice and bob, the raw sender and receiver have a connection each.
func BenchmarkDM(b *testing.B) {
	url := setup(b)
	alice := endpoint(b, url, "alice")
	bob := endpoint(b, url, "bob")
	if err := bob.Join(b.Context()); err != nil {
		b.Fatal(err)
	}
	subject := protocol.InstSubject(space, bob.Principal(), alice.Principal())
	body := payload(b, alice)

	js, err := jetstream.New(dial(b, url)) // the raw sender
	if err != nil {
		b.Fatal(err)
	}
	rawReceiver, err := jetstream.New(dial(b, url))
	if err != nil {
		b.Fatal(err)
	}
	dm := protocol.StreamDM(space)
	cons, err := rawReceiver.CreateConsumer(b.Context(), dm, jetstream.ConsumerConfig{
		Durable: "raw_bench", FilterSubject: protocol.InstSubject(space, protocol.Principal{Owner: "local", Actor: "carol"}, alice.Principal()),
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	rawSubject := strings.Replace(subject, ".bob.", ".carol.", 1)

	var raw, cotal meter
	for b.Loop() {
		purge(b, js, dm)
		raw.measure(side("raw"), func() {
			ctx, cancel := context.WithTimeout(b.Context(), roundTimeout)
			defer cancel()
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
			defer cc.Stop()
			err = publishAll(ctx, messages, func(i int) (jetstream.PubAckFuture, error) {
				msg := nats.NewMsg(rawSubject)
				msg.Data = body
				msg.Header.Set(jetstream.MsgIDHeader, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(i))
				return js.PublishMsgAsync(msg)
			})
			if err != nil {
				b.Fatal(err)
			}
			await(ctx, b, done, "raw dm")
		})
		purge(b, js, dm)
		cotal.measure(side("cotal"), func() {
			cotalRound(b, bob, true, func() (jetstream.PubAckFuture, error) {
				m := alice.Envelope(client.Text(text))
				m.To = bob.Principal().String()
				return alice.PublishAsync(subject, m)
			})
		})
	}
	report(b, &raw, &cotal)
}

// report gives the rates of raw and cotal and their ratio, and the CPU ratio: raw's
// process CPU per message over cotal's (1 means a cotal message costs what a raw one
// does, below 1 that it costs more).
func report(b *testing.B, raw, cotal *meter) {
	b.ReportMetric(raw.rate(), "raw-msgs/s")
	b.ReportMetric(cotal.rate(), "cotal-msgs/s")
	b.ReportMetric(cotal.rate()/raw.rate(), "cotal/raw")
	b.ReportMetric(float64(raw.cpuPerMsg())/float64(cotal.cpuPerMsg()), "cotal/raw-cpu")
	b.ReportMetric(float64(raw.cpuPerMsg().Nanoseconds())/1e3, "raw-cpu-µs/msg")
	b.ReportMetric(float64(cotal.cpuPerMsg().Nanoseconds())/1e3, "cotal-cpu-µs/msg")
}
