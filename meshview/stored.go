package meshview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// DefaultStoredTail is how many of a stream's newest messages a watcher reads at start
// through its history reader (Watcher.Reader).
const DefaultStoredTail = 2000

// readTail reads the newest n messages of stream through the transient reader name (a
// history reader an admin credential may create on CHAT and DM: chathist_<o>-<a>-<uid>),
// oldest first, and deletes the reader. It reads no consumer-less path and asks no
// daemon, so it needs only the reader's grants and STREAM.INFO.
func readTail(ctx context.Context, js jetstream.JetStream, stream, name string, n int) ([]jetstream.Msg, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 || n <= 0 {
		return nil, nil
	}
	start := state.FirstSeq
	if state.LastSeq >= uint64(n) && state.LastSeq-uint64(n)+1 > start {
		start = state.LastSeq - uint64(n) + 1
	}
	// A reader a crash left behind has another start: clear it first.
	if err := js.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("clear reader %s on %s: %w", name, stream, err)
	}
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name: name, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: start, InactiveThreshold: time.Minute, MemoryStorage: true,
	})
	if err != nil {
		return nil, fmt.Errorf("reader %s on %s: %w", name, stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, name) // it also expires on its own after a minute
	}()
	pending := cons.CachedInfo().NumPending
	out := make([]jetstream.Msg, 0, min(pending, uint64(n)))
	for pending > 0 && len(out) < n {
		batch, err := cons.Fetch(min(int(pending), 256), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return out, fmt.Errorf("read %s: %w", stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			out = append(out, m)
			if md, err := m.Metadata(); err == nil {
				pending = md.NumPending
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return out, fmt.Errorf("read %s: %w", stream, err)
		}
		if got == 0 {
			break // nothing came within the wait: what was there is read
		}
	}
	return out, nil
}

// prefillStored reads the newest channel posts (and, with DMs, direct messages) from the
// space's streams into the model, each passing the same receive checks as a live one.
func (w *Watcher) prefillStored(ctx context.Context) error {
	ep := w.Endpoint
	space := ep.Space()
	tail := w.StoredTail
	if tail <= 0 {
		tail = DefaultStoredTail
	}
	streams := []string{protocol.StreamChat(space)}
	if w.DMs {
		streams = append(streams, protocol.StreamDM(space))
	}
	for _, stream := range streams {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		msgs, err := readTail(rctx, ep.JetStream(), stream, w.Reader, tail)
		cancel()
		for _, m := range msgs {
			if r, err := protocol.Receive(m.Subject(), m.Data()); err == nil {
				w.Model.ApplyMessage(r)
			}
		}
		if err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	return nil
}
