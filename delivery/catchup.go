package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// owedKey is one membership row at one generation.
type owedKey struct {
	member  string
	channel string
	gen     uint64
}

func keyOf(r memberRow) owedKey { return owedKey{r.m.key(), r.Channel, r.Generation} }

// owe notes that the new membership r needs its catch-up, before its row is written.
func (f *fanout) owe(r memberRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owed == nil {
		f.owed = map[owedKey]memberRow{}
	}
	f.owed[keyOf(r)] = r
}

// forgive drops r's catch-up (its row was not written).
func (f *fanout) forgive(r memberRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owed, keyOf(r))
}

// take reports whether r's catch-up is still owed, and marks it run.
func (f *fanout) take(r memberRow) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.owed[keyOf(r)]
	delete(f.owed, keyOf(r))
	return ok
}

// catchUpSeen runs the owed catch-ups of the rows ro holds, before a round copies for
// them. A catch-up that fails stays owed.
func (f *fanout) catchUpSeen(ctx context.Context, ro roster) error {
	f.mu.Lock()
	var due []memberRow
	for k, r := range f.owed {
		for _, row := range ro.byMember[k.member] {
			if row.Channel == k.channel && row.Generation == k.gen && row.Active() {
				due = append(due, r)
				break
			}
		}
	}
	f.mu.Unlock()
	for _, r := range due {
		if !f.take(r) {
			continue
		}
		if err := f.catchUp(ctx, r); err != nil {
			f.owe(r)
			return fmt.Errorf("catch-up of %s on %s: %w", r.m.key(), r.Channel, err)
		}
	}
	return nil
}

// requeue puts a membership back for a later catch-up, dropping it if the queue is full
// (the row stays; only posts before the daemon saw it could miss their copy).
func (f *fanout) requeue(r memberRow) {
	select {
	case f.catchups <- r:
	default:
		f.log.Warn("catch-up dropped", "member", r.m.key(), "channel", r.Channel)
	}
}

// catchUp copies the posts of a new membership's window that the fan-out passed before the
// row existed: (joinCursor, progress]. It runs between fan-out rounds, so copies keep CHAT
// order, and every later post is the fan-out's, which already sees the row.
func (f *fanout) catchUp(ctx context.Context, r memberRow) error {
	f.mu.Lock()
	upTo := f.progress
	f.mu.Unlock()
	if r.JoinCursor >= upTo {
		return nil
	}
	if err := f.fresh(ctx); err != nil {
		return err
	}
	chat := protocol.StreamChat(f.space)
	if err := f.js.DeleteConsumer(ctx, chat, protocol.ConsumerCatchup); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("clear %s: %w", protocol.ConsumerCatchup, err)
	}
	cons, err := f.js.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{
		Name:              protocol.ConsumerCatchup,
		FilterSubject:     protocol.ChannelFilter(f.space, r.Channel),
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.JoinCursor + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", protocol.ConsumerCatchup, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = f.js.DeleteConsumer(dctx, chat, protocol.ConsumerCatchup)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return nil
	}
	cl, ro, ac := f.classes.snapshot(), f.roster.snapshot(), f.acls.snapshot()
	var futs inflight
	for done := false; !done; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream > upTo {
				done = true
				break
			}
			if p, ok := parsePost(m.Subject(), m.Data(), md.Sequence.Stream); ok {
				for _, t := range plan(p, cl, ro, ac, &r.m, time.Now()) {
					cm, err := copyMsg(f.space, p, t)
					if err != nil {
						break
					}
					if err := f.write(ctx, &futs, cm); err != nil {
						return err
					}
				}
			}
			if md.NumPending == 0 || md.Sequence.Stream == upTo {
				done = true
				break
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 {
			done = true
		}
	}
	if err := f.await(ctx, &futs); err != nil {
		return err
	}
	if futs.n > 0 {
		f.log.Info("catch-up copied", "member", r.m.key(), "channel", r.Channel, "copies", futs.n)
	}
	return nil
}
