package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// JoinChannel subscribes to channel (a pattern may hold * and a final >) and returns once
// the subscription is live. When the registry says the channel replays, a reader owned by
// the endpoint then streams its history up to the moment of joining into Messages(),
// marked Historical, in stream order and ahead of the channel's live posts (which wait
// for it), deduplicated against what arrives live or durable. Only history after the
// channel's cursor (see SetShown) replays, within its replay window, and on a durable
// channel only up to the membership's join cursor: later posts are hand-off copies,
// surfaced after the history. Joining a channel twice is a no-op.
func (e *Endpoint) JoinChannel(ctx context.Context, channel string) error {
	if err := e.subscribe(ctx, channel, true); err != nil {
		return err
	}
	e.channelsChanged(ctx)
	return nil
}

// Listen subscribes to channel like JoinChannel but without replaying history, and
// surfaces this endpoint's own posts too: the tap of an observer such as the console.
// It needs no Join.
func (e *Endpoint) Listen(ctx context.Context, channel string) error {
	e.tap.Store(true)
	return e.subscribe(ctx, channel, false)
}

func (e *Endpoint) subscribe(ctx context.Context, channel string, replay bool) (err error) {
	if err := protocol.CheckChannelPattern(channel); err != nil {
		return err
	}
	e.mu.Lock()
	dup := e.channels[channel] != nil
	e.mu.Unlock()
	if dup {
		return nil
	}
	// Live posts of the channel wait behind this gate until its history is surfaced.
	var g *gate
	if replay {
		g = e.claimGate(channel)
		defer func() {
			if g != nil {
				e.openGate(channel, g)
			}
		}()
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
	info := s.CachedInfo()
	watermark := info.State.LastSeq
	after := e.cursor(channel, info.Created, watermark)

	cfg, err := e.channelConfig(ctx, channel)
	if err != nil {
		e.log.Warn("channel registry unreadable; replaying history", "channel", channel, "err", err)
	}
	if !replay {
		return nil
	}
	// A durable member gets every post after its membership's join cursor as a hand-off
	// copy (a real message, not history), so history stops there.
	upTo := watermark
	if joinCursor, ok := e.joinDurableChannel(ctx, channel, watermark, cfg); ok && joinCursor < upTo {
		upTo = joinCursor
	}
	if upTo <= after || (cfg.Replay != nil && !*cfg.Replay) {
		e.noteShown(channel, watermark)
		return nil
	}
	since := replaySince(cfg.ReplayWindow, time.Now())
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("join channel %s: the endpoint is closed", channel)
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func(g *gate) {
		defer e.wg.Done()
		defer e.openGate(channel, g)
		if err := e.replay(e.ctx, channel, after, upTo, since); err != nil {
			if e.ctx.Err() == nil {
				e.log.Warn("channel history not replayed", "channel", channel, "err", err)
			}
			return
		}
		e.noteShown(channel, watermark)
	}(g)
	g = nil // the reader opens it
	return nil
}

// gate holds back live and durable copies of a channel while its history replays.
type gate struct {
	done    chan struct{}
	claimed bool // a subscribe owns it (Join registers gates before binding durables)
}

// reserveGates registers a gate for each channel Join is about to join, so durable
// copies bound before the channels wait for their history; release opens those no
// subscribe claimed.
func (e *Endpoint) reserveGates(channels []string) (release func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var mine []*gate
	var names []string
	for _, ch := range channels {
		if e.gates[ch] != nil || e.channels[ch] != nil {
			continue
		}
		g := &gate{done: make(chan struct{})}
		e.gates[ch] = g
		e.gating.Store(int32(len(e.gates)))
		mine, names = append(mine, g), append(names, ch)
	}
	return func() {
		for i, g := range mine {
			e.mu.Lock()
			claimed := g.claimed
			e.mu.Unlock()
			if !claimed {
				e.openGate(names[i], g)
			}
		}
	}
}

// claimGate returns the channel's reserved gate, or a new one.
func (e *Endpoint) claimGate(channel string) *gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g := e.gates[channel]; g != nil && !g.claimed {
		g.claimed = true
		return g
	}
	g := &gate{done: make(chan struct{}), claimed: true}
	e.gates[channel] = g
	e.gating.Store(int32(len(e.gates)))
	return g
}

// openGate lets the channel's held copies through.
func (e *Endpoint) openGate(channel string, g *gate) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gates[channel] == g {
		delete(e.gates, channel)
		e.gating.Store(int32(len(e.gates)))
	}
	select {
	case <-g.done:
	default:
		close(g.done)
	}
}

// waitHistory waits until no history of a channel matching ch is replaying; false means
// the endpoint closed first. While no history replays at all it returns at once, without
// e.mu (the hot path of every live copy): gating changes with gates, under e.mu, so
// reading 0 is reading gates as a locked read just before the next gate would. A gate is
// registered before the subscription or durable whose copies it holds is made, so those
// copies always see it.
func (e *Endpoint) waitHistory(ch string) bool {
	for {
		if e.gating.Load() == 0 {
			return true
		}
		e.mu.Lock()
		var wait chan struct{}
		for pattern, g := range e.gates {
			if protocol.ChannelMatches(pattern, ch) {
				wait = g.done
				break
			}
		}
		e.mu.Unlock()
		if wait == nil {
			return true
		}
		select {
		case <-wait:
		case <-e.ctx.Done():
			return false
		}
	}
}

// WaitReplayed waits until the history of every channel joined so far has been handed to
// Messages(), so a caller that ends at the end of its input (a script piping lines to
// cotal join) still shows the history it joined. Keep reading Messages() meanwhile: a
// replay waits for room there. It fails when ctx ends or the endpoint closes first.
func (e *Endpoint) WaitReplayed(ctx context.Context) error {
	for {
		e.mu.Lock()
		var wait chan struct{}
		for _, g := range e.gates {
			wait = g.done
			break
		}
		e.mu.Unlock()
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.ctx.Done():
			return errors.New("wait for history: the endpoint closed")
		}
	}
}

// cursor is the stream sequence through which channel's history was already shown, or 0.
// A cursor of another incarnation of the stream, or past its end, is ignored.
func (e *Endpoint) cursor(channel string, created time.Time, watermark uint64) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.shown.Stream.Equal(created) {
		e.shown = Shown{Stream: created, Channels: map[string]uint64{}}
	}
	if e.shown.Channels == nil {
		e.shown.Channels = map[string]uint64{}
	}
	if c := e.shown.Channels[channel]; c <= watermark {
		return c
	}
	return 0
}

// noteShown records that channel's history through seq was shown (or passed over).
func (e *Endpoint) noteShown(channel string, seq uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.joinedAt[channel] = seq
	if seq > e.shown.Channels[channel] {
		e.shown.Channels[channel] = seq
	}
}

// SetShown gives the endpoint how far its identity was already shown each channel's
// history (Shown of an earlier session), so a rejoin replays only what follows. Call it
// before Join and JoinChannel.
func (e *Endpoint) SetShown(s Shown) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shown = Shown{Stream: s.Stream, Channels: maps.Clone(s.Channels)}
}

// Shown is how far this identity has been shown each channel's history; after Close it
// includes what arrived live while joined (unless the connection was lost meanwhile, when
// posts of the gap may not have been seen). Give it to SetShown in the next session.
func (e *Endpoint) Shown() Shown {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Shown{Stream: e.shown.Stream, Channels: maps.Clone(e.shown.Channels)}
}

// noteLeaving advances the cursor of every channel joined and replayed this session to
// the stream's last sequence in chat, CHAT's info read at Close (nil when it was not
// read): its later posts were seen live. A lost connection may have missed some, so then
// nothing advances.
func (e *Endpoint) noteLeaving(chat *jetstream.StreamInfo) {
	if chat == nil || e.lostWhy.wasLost() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.shown.Stream.Equal(chat.Created) {
		return
	}
	for ch := range e.joinedAt {
		if e.channels[ch] != nil && chat.State.LastSeq > e.shown.Channels[ch] {
			e.shown.Channels[ch] = chat.State.LastSeq
		}
	}
}

// leavingInfo reads CHAT's info once at Close, for noteLeaving and the last confirmation
// of the live positions, when either needs it: nil when neither does, the connection is
// down or the read fails.
func (e *Endpoint) leavingInfo() *jetstream.StreamInfo {
	e.mu.Lock()
	replayed := len(e.joinedAt) > 0
	e.mu.Unlock()
	e.pos.mu.Lock()
	tracked := len(e.pos.tracks) > 0
	e.pos.mu.Unlock()
	if (!replayed && !tracked) || !e.nc.IsConnected() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DeliveryTimeout)
	defer cancel()
	s, err := e.js.Stream(ctx, protocol.StreamChat(e.cfg.Space))
	if err != nil {
		e.log.Debug("history cursor and live position not advanced at close", "err", err)
		return nil
	}
	return s.CachedInfo()
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
	e.channelsChanged(e.ctx)
	if durable && why == "" {
		if err := e.leaveDurableChannel(channel); err != nil {
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

// replaySince is when the replay of a channel whose window is w starts: the zero time (all
// history) for no window, one over protocol.MaxReplayWindow or one not of the grammar, and
// now for a zero window (it replays nothing).
func replaySince(w string, now time.Time) time.Time {
	d, err := protocol.ParseReplayWindow(w)
	switch {
	case err == nil:
		return now.Add(-d)
	case errors.Is(err, protocol.ErrZeroReplayWindow):
		return now
	}
	return time.Time{}
}

// replay surfaces channel history after sequence after (0: from the start, or since when
// set) up to watermark through a transient single-filter consumer, then deletes it. It
// blocks while Messages() is full, so it runs on its own goroutine.
func (e *Endpoint) replay(ctx context.Context, channel string, after, watermark uint64, since time.Time) error {
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
	switch {
	case after > 0: // the window, if any, is applied per message below
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	case !since.IsZero():
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
		done, err := e.replayBatch(ctx, cons, watermark, since)
		if done || err != nil {
			return err
		}
	}
}

// replayBatch fetches one batch of history and surfaces it; done means the watermark or
// the end of the stream was reached. The batch is read whole before any of it is
// surfaced, so a slow reader of Messages() never outlasts the fetch.
func (e *Endpoint) replayBatch(ctx context.Context, cons jetstream.Consumer, watermark uint64, since time.Time) (done bool, err error) {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	batch, err := cons.Fetch(256, jetstream.FetchContext(fctx))
	if err != nil {
		return true, err
	}
	var got []jetstream.Msg
	var mds []*jetstream.MsgMetadata
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return true, err
		}
		if md.Sequence.Stream > watermark {
			done = true
			break
		}
		got, mds = append(got, m), append(mds, md)
		if md.NumPending == 0 || md.Sequence.Stream == watermark {
			done = true
			break
		}
	}
	if !done {
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return true, err
		}
	}
	cancel()
	for i, m := range got {
		md := mds[i]
		if !since.IsZero() && md.Timestamp.Before(since) {
			continue
		}
		if r, ok := e.check(m.Subject(), m.Data()); ok {
			in := &Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Historical: true, Seq: md.Sequence.Stream}
			if surfaced, dup := e.surfaceFirst(in); !surfaced && !dup {
				return true, ctx.Err()
			}
		}
	}
	return done || len(got) == 0, nil
}
