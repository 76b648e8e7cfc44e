package bench

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// postRounds is how many round trips of each kind one iteration of BenchmarkPostRoundTrip
// times.
const postRounds = 2000

// BenchmarkPostRoundTrip times single round trips, one at a time: a cotal Post (build the
// envelope, check, encode, publish, wait for the broker's stored-acknowledgement) against
// a raw JetStream publish of a same-sized body with a message id to the same subject,
// waiting for its ack. The two alternate message by message, so load on the machine falls
// on both alike; it reports each side's p50 and p99 and the ratio of the p99s.
func BenchmarkPostRoundTrip(b *testing.B) {
	url := setup(b)
	alice := endpoint(b, url, "alice")
	subject := protocol.ChatSubject(space, alice.Principal(), "general")
	body := payload(b, alice)
	js, err := jetstream.New(dial(b, url))
	if err != nil {
		b.Fatal(err)
	}
	chat := protocol.StreamChat(space)
	var raw, cotal []time.Duration
	for b.Loop() {
		purge(b, js, chat)
		ctx := b.Context() // no deadline, as an agent's tool call sends: each side bounds it itself
		for i := range postRounds {
			msg := nats.NewMsg(subject)
			msg.Data = body
			msg.Header.Set(jetstream.MsgIDHeader, "raw-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.Itoa(i))
			start := time.Now()
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				b.Fatalf("raw publish: %v", err)
			}
			raw = append(raw, time.Since(start))

			start = time.Now()
			if _, err := alice.Post(ctx, "general", client.Text(text)); err != nil {
				b.Fatalf("post: %v", err)
			}
			cotal = append(cotal, time.Since(start))
		}
	}
	rawP99, cotalP99 := quantile(raw, 0.99), quantile(cotal, 0.99)
	b.ReportMetric(float64(quantile(raw, 0.5).Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(rawP99.Microseconds()), "raw-p99-µs")
	b.ReportMetric(float64(quantile(cotal, 0.5).Microseconds()), "post-p50-µs")
	b.ReportMetric(float64(cotalP99.Microseconds()), "post-p99-µs")
	b.ReportMetric(float64(cotalP99)/float64(rawP99), "post/raw-p99")
}

// quantile is the q-quantile (0 < q ≤ 1) of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
