package delivery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Held is one durable of a recipient and what it holds: messages not yet delivered
// (Waiting) and delivered but not acked (Unacked), and the first of them, read from the
// durable's ack floor on.
type Held struct {
	Name     string        `json:"name"`
	Stream   string        `json:"stream"`
	Kind     string        `json:"kind"` // "dm" or "channel" (the hand-off durable)
	Waiting  uint64        `json:"waiting"`
	Unacked  int           `json:"unacked"`
	Messages []HeldMessage `json:"messages"`
}

// HeldMessage is one held message.
type HeldMessage struct {
	Seq     uint64 `json:"seq"` // in the durable's stream
	ID      string `json:"id"`
	From    string `json:"from"`
	Name    string `json:"name"`
	Channel string `json:"channel,omitempty"`
	Reason  string `json:"reason,omitempty"` // why a hand-off copy was made
	Text    string `json:"text"`
	TS      int64  `json:"ts"`
}

// Pending lists what the DM durables and hand-off durables of p hold, up to limit messages
// each. It is read-only: it never acks, creates or changes a durable (the messages are
// read through a transient ordered reader).
func Pending(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, limit int) ([]Held, error) {
	var out []Held
	for _, d := range []struct {
		stream, prefix, kind string
	}{
		{protocol.StreamDM(space), protocol.ConsumerDMPrefix(p), "dm"},
		{protocol.StreamDLV(space), protocol.ConsumerDLVPrefix(p), "channel"},
	} {
		s, err := js.Stream(ctx, d.stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pending of %s: stream %s: %w", p, d.stream, err)
		}
		names := s.ConsumerNames(ctx)
		var found []string
		for n := range names.Name() {
			if strings.HasPrefix(n, d.prefix) && protocol.ValidLifecycleUID(n[len(d.prefix):]) {
				found = append(found, n)
			}
		}
		if err := names.Err(); err != nil {
			return nil, fmt.Errorf("pending of %s: durables of %s: %w", p, d.stream, err)
		}
		sort.Strings(found)
		for _, n := range found {
			h, err := held(ctx, js, space, s, n, d.kind, limit)
			if err != nil {
				return nil, fmt.Errorf("pending of %s: %w", p, err)
			}
			out = append(out, h)
		}
	}
	return out, nil
}

func held(ctx context.Context, js jetstream.JetStream, space string, s jetstream.Stream, name, kind string, limit int) (Held, error) {
	c, err := s.Consumer(ctx, name)
	if err != nil {
		return Held{}, fmt.Errorf("durable %s: %w", name, err)
	}
	info := c.CachedInfo()
	h := Held{Name: name, Stream: info.Stream, Kind: kind, Waiting: info.NumPending, Unacked: info.NumAckPending, Messages: []HeldMessage{}}
	want := min(uint64(limit), info.NumPending+uint64(info.NumAckPending))
	if want == 0 {
		return h, nil
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = []string{info.Config.FilterSubject}
	}
	r, err := js.OrderedConsumer(ctx, info.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: info.AckFloor.Stream + 1, InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return Held{}, fmt.Errorf("read %s: %w", name, err)
	}
	batch, err := r.Fetch(int(want), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return Held{}, fmt.Errorf("read %s: %w", name, err)
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return Held{}, fmt.Errorf("read %s: %w", name, err)
		}
		hm := HeldMessage{Seq: md.Sequence.Stream}
		subject := m.Subject()
		data := m.Data()
		if kind == "channel" {
			ho, err := protocol.DecodeHandoff(space, m.Headers().Get, data)
			subject, data, hm.Reason = ho.Subject, ho.Data, ho.Reason
			if err != nil {
				subject, data = "", nil
			}
			if ho.Seq != 0 {
				hm.Seq = ho.Seq
			}
		}
		if rec, err := protocol.Receive(subject, data); err == nil {
			hm.ID, hm.From, hm.Name, hm.Text, hm.TS = rec.Message.ID, rec.Message.From.ID, rec.Message.From.Name, rec.Message.Text(), rec.Message.TS
			hm.Channel = rec.Subject.Channel
		} else {
			hm.Text = "(unreadable: " + err.Error() + ")"
		}
		h.Messages = append(h.Messages, hm)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
		return Held{}, fmt.Errorf("read %s: %w", name, err)
	}
	return h, nil
}
