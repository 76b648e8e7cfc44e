package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// ChannelConfig is a channel's entry in the channel registry (also the shape of the
// space-wide defaults under protocol.ChannelDefaultsKey).
type ChannelConfig struct {
	Replay        *bool  `json:"replay,omitempty"`
	ReplayWindow  string `json:"replayWindow,omitempty"`
	DeliveryClass string `json:"deliveryClass,omitempty"`
	Description   string `json:"description,omitempty"`
	Instructions  string `json:"instructions,omitempty"`
}

// JoinChannel subscribes to channel (a pattern may hold * and a final >) and, when the
// registry says the channel replays, surfaces its history up to the moment of joining,
// marked Historical and deduplicated against what arrives live. Joining a channel twice
// is a no-op.
func (e *Endpoint) JoinChannel(ctx context.Context, channel string) error {
	return e.subscribe(ctx, channel, true)
}

// Listen subscribes to channel like JoinChannel but without replaying history, and
// surfaces this endpoint's own posts too: the tap of an observer such as the console.
// It needs no Join.
func (e *Endpoint) Listen(ctx context.Context, channel string) error {
	e.tap.Store(true)
	return e.subscribe(ctx, channel, false)
}

func (e *Endpoint) subscribe(ctx context.Context, channel string, replay bool) error {
	if err := protocol.CheckChannelPattern(channel); err != nil {
		return err
	}
	e.mu.Lock()
	dup := e.channels[channel] != nil
	e.mu.Unlock()
	if dup {
		return nil
	}
	filter := protocol.ChannelFilter(e.cfg.Space, channel)
	sub, err := e.nc.Subscribe(filter, e.onLive)
	if err != nil {
		return fmt.Errorf("join channel %s: %w", channel, err)
	}
	if err := sub.SetPendingLimits(-1, 64<<20); err != nil {
		return fmt.Errorf("join channel %s: %w", channel, err)
	}
	// A refused subscription comes back asynchronously; flushing surfaces it here.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = e.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("join channel %s: %w", channel, err)
	}
	// LastError keeps the last refusal of any subject; only one naming this filter counts.
	if err := e.nc.LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+filter+`"`) {
		_ = sub.Unsubscribe()
		return fmt.Errorf("join channel %s: refused by the broker: %w", channel, err)
	}
	e.mu.Lock()
	e.channels[channel] = sub
	delete(e.left, channel)
	e.mu.Unlock()
	// The watermark is read after the subscription is live, so no post falls between
	// history and live; one on both sides is deduplicated by id.
	stream := protocol.StreamChat(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		_ = e.LeaveChannel(channel) // undo the join; the stream error is the one to report
		return e.streamErr(stream, err)
	}
	watermark := s.CachedInfo().State.LastSeq

	cfg, err := e.channelConfig(ctx, channel)
	if err != nil {
		e.log.Warn("channel registry unreadable; replaying history", "channel", channel, "err", err)
	}
	if replay {
		e.durableJoin(ctx, channel, watermark, cfg)
	}
	if !replay || watermark == 0 || (cfg.Replay != nil && !*cfg.Replay) {
		return nil
	}
	var since time.Time
	if d, ok := parseWindow(cfg.ReplayWindow); ok {
		since = time.Now().Add(-d)
	}
	if err := e.replay(ctx, channel, watermark, since); err != nil {
		return fmt.Errorf("join channel %s: history: %w", channel, err)
	}
	return nil
}

// LeaveChannel unsubscribes from channel and, when its durable backstop was established,
// tombstones the durable membership so the daemon stops copying its posts. Leaving a
// channel not joined is a no-op. An error after the unsubscribe says the live leave
// happened but the daemon did not record the durable one; this endpoint drops the
// channel's later copies either way.
func (e *Endpoint) LeaveChannel(channel string) error {
	e.mu.Lock()
	sub := e.channels[channel]
	delete(e.channels, channel)
	why, durable := e.backstop[channel]
	delete(e.backstop, channel)
	e.mu.Unlock()
	if sub == nil {
		return nil
	}
	if err := sub.Unsubscribe(); err != nil {
		return fmt.Errorf("leave channel %s: %w", channel, err)
	}
	if durable && why == "" {
		if err := e.durableLeave(channel); err != nil {
			return fmt.Errorf("leave channel %s: left live; durable leave not recorded: %w", channel, err)
		}
	}
	return nil
}

// Channels lists the joined channels, sorted.
func (e *Endpoint) Channels() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.channels))
	for ch := range e.channels {
		out = append(out, ch)
	}
	sort.Strings(out)
	return out
}

// channelConfig returns the effective registry entry of channel: its own fields over
// the space defaults. A concrete channel without an entry takes the defaults.
func (e *Endpoint) channelConfig(ctx context.Context, channel string) (ChannelConfig, error) {
	kv, err := e.js.KeyValue(ctx, protocol.BucketChannels(e.cfg.Space))
	if err != nil {
		return ChannelConfig{}, fmt.Errorf("channel registry: %w", err)
	}
	var def, own ChannelConfig
	if err := getJSON(ctx, kv, protocol.ChannelDefaultsKey, &def); err != nil {
		return ChannelConfig{}, err
	}
	if protocol.CheckConcreteChannel(channel) == nil {
		if err := getJSON(ctx, kv, channel, &own); err != nil {
			return def, err
		}
	}
	if own.Replay == nil {
		own.Replay = def.Replay
	}
	if own.ReplayWindow == "" {
		own.ReplayWindow = def.ReplayWindow
	}
	if own.DeliveryClass == "" {
		own.DeliveryClass = def.DeliveryClass
	}
	return own, nil
}

func getJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	entry, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("channel registry %q: %w", key, err)
	}
	if err := json.Unmarshal(entry.Value(), v); err != nil {
		return fmt.Errorf("channel registry %q: %w", key, err)
	}
	return nil
}

// parseWindow reads a replay window such as 30s, 15m, 2h or 7d.
func parseWindow(s string) (time.Duration, bool) {
	if len(s) < 2 {
		return 0, false
	}
	var n int64
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > 1<<31 {
			return 0, false
		}
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// replay surfaces channel history up to watermark through a transient single-filter
// consumer, then deletes it.
func (e *Endpoint) replay(ctx context.Context, channel string, watermark uint64, since time.Time) error {
	// One reader per incarnation, named by its lifecycle uid so a credential can grant it:
	// replays run one at a time and clear a reader a crash left behind first.
	e.replayMu.Lock()
	defer e.replayMu.Unlock()
	uid := e.lifecycleUID()
	if uid == "" {
		uid = protocol.NewLifecycleUID()
	}
	stream := protocol.StreamChat(e.cfg.Space)
	name := protocol.ConsumerHistory(e.me, uid)
	if err := e.js.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("clear %s: %w", name, err)
	}
	cfg := jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     protocol.ChannelFilter(e.cfg.Space, channel),
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := e.js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("create %s: %w", cfg.Name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := e.js.DeleteConsumer(dctx, stream, cfg.Name); err != nil {
			e.log.Debug("delete history reader", "name", cfg.Name, "err", err)
		}
	}()
	if cons.CachedInfo().NumPending == 0 {
		return nil
	}
	for {
		done, err := e.replayBatch(ctx, cons, watermark)
		if done || err != nil {
			return err
		}
	}
}

// replayBatch surfaces one fetched batch of history; done means the watermark or the end
// of the stream was reached.
func (e *Endpoint) replayBatch(ctx context.Context, cons jetstream.Consumer, watermark uint64) (done bool, err error) {
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	batch, err := cons.Fetch(256, jetstream.FetchContext(fctx))
	if err != nil {
		return true, err
	}
	n := 0
	for m := range batch.Messages() {
		n++
		md, err := m.Metadata()
		if err != nil {
			return true, err
		}
		if md.Sequence.Stream > watermark {
			return true, nil
		}
		if r, ok := e.check(m.Subject(), m.Data()); ok && e.seen.first(r.Message.ID) {
			in := &Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Historical: true, Seq: md.Sequence.Stream}
			if !e.surface(in) {
				return true, ctx.Err()
			}
		}
		if md.NumPending == 0 || md.Sequence.Stream == watermark {
			return true, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return true, err
	}
	return n == 0, nil
}
