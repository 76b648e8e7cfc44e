package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// WatchPresenceCounting is WatchPresence counting the records it decodes in decodes.
// viaConsumer takes the KV-watch path a credential without the live grant takes.
func WatchPresenceCounting(ctx context.Context, e *Endpoint, viaConsumer bool, decodes *atomic.Int64) (<-chan PeerChange, error) {
	if !viaConsumer {
		return e.watchPresence(ctx, PresenceEvery, decodes)
	}
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return nil, err
	}
	return e.watchPresenceConsumer(ctx, kv, PresenceEvery, decodes)
}

// WatchPresencePerWrite is the watch as it was before records were held: every live
// write is decoded and applied in turn (here without the old 256-slot drop, so the
// baseline does all the work it was given). Benchmarks compare against it.
func WatchPresencePerWrite(ctx context.Context, e *Endpoint, decodes *atomic.Int64) (<-chan PeerChange, error) {
	bucket := protocol.BucketPresence(e.cfg.Space)
	prefix := kvSubjectPrefix(bucket)
	live := make(chan *nats.Msg, 1<<16)
	sub, err := e.subscribeBucket(ctx, bucket, func(m *nats.Msg) {
		select {
		case live <- m:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, err
	}
	out := make(chan PeerChange, 64)
	go func() {
		defer close(out)
		defer func() { _ = sub.Unsubscribe() }()
		w := newPresenceWatch(ctx, e, out, decodes)
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-live:
				if r, ok := recordOf(m, prefix); ok && !w.apply(r) {
					return
				}
			}
		}
	}()
	return out, nil
}

// ConfirmLive runs one confirmation of the live positions, as the report loop does.
func ConfirmLive(ctx context.Context, e *Endpoint) { e.confirmLive(ctx) }

// ConfirmLiveWaits reports whether a live confirmation waits for the live handler.
func ConfirmLiveWaits(e *Endpoint) bool {
	e.pos.mu.Lock()
	defer e.pos.mu.Unlock()
	return e.pos.wake != nil
}

// LivePosition is the live position of a tracked channel and how many of its live
// messages were handed to the handler.
func LivePosition(e *Endpoint, channel string) (live uint64, delivered int) {
	e.pos.mu.Lock()
	defer e.pos.mu.Unlock()
	t := e.pos.tracks[channel]
	if t == nil {
		return 0, 0
	}
	n, _ := t.sub.Delivered()
	return t.live, int(n)
}

// UnsubscribeLate makes the durable consumers ep binds from now on (call it before Join)
// unsubscribe late after Stop, as a starved goroutine of the JetStream library does:
// ConsumeContext.Stop only asks that goroutine to unsubscribe, and Closed() fires once it
// did. Here it does so after the given delay.
func UnsubscribeLate(ep *Endpoint, after time.Duration) {
	ep.wrapConsume = func(cc jetstream.ConsumeContext) jetstream.ConsumeContext {
		return &lateStop{ConsumeContext: cc, after: after}
	}
}

// lateStop stops a consume context a while after Stop is called.
type lateStop struct {
	jetstream.ConsumeContext
	after time.Duration
	once  sync.Once
}

func (l *lateStop) Stop() {
	l.once.Do(func() { time.AfterFunc(l.after, l.ConsumeContext.Stop) })
}

// ConfirmLiveReading runs one confirmation of the live positions as if CHAT's last
// sequence were last: a stream that stored a post before the broker routed it here.
func ConfirmLiveReading(ctx context.Context, e *Endpoint, last uint64) error {
	s, err := e.js.Stream(ctx, protocol.StreamChat(e.cfg.Space))
	if err != nil {
		return err
	}
	info := *s.CachedInfo()
	info.State.LastSeq = last
	e.pos.confirms.Lock()
	defer e.pos.confirms.Unlock()
	e.confirmLiveAt(ctx, &info)
	return nil
}

// SetLiveClock sets the clock the live claims are timed by.
func SetLiveClock(e *Endpoint, now func() time.Time) {
	e.pos.mu.Lock()
	defer e.pos.mu.Unlock()
	e.pos.now = now
}

// LiveLag is how long after it was read a last sequence may be claimed live.
const LiveLag = liveLag

// Report runs one confirmation round, as the report loop does: the live positions, then
// the position of every tracked channel sent to the daemon, waiting for its answers.
func Report(ctx context.Context, e *Endpoint) { e.confirmAndReport(ctx) }

// HandOver hands m to the endpoint's hand-off handler, as its consumer does: after Close,
// a copy the consumer handed over late (its drain timed out).
func HandOver(e *Endpoint, m jetstream.Msg) { e.onHandoff(m) }

// AckSubject is the subject a durable copy's acks go to ("" for a live copy).
func AckSubject(in *Incoming) string {
	if in.msg == nil {
		return ""
	}
	return in.msg.Reply()
}
