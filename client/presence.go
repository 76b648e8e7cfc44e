package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Peer is one roster entry: the last presence record of a principal and whether it is
// online now (fresh and not offline).
type Peer struct {
	protocol.Presence
	Online bool
}

// Harness is what runs the peer: its card's meta "connector" (claude, codex, opencode,
// command), else "service" for a card that names one, else "person" for an endpoint card
// (a person at cotal join, the console or the dashboard), else "" (an agent that does not
// say).
func (p Peer) Harness() string {
	if h := p.metaString("connector"); h != "" {
		return h
	}
	switch {
	case p.metaString("service") != "":
		return "service"
	case p.Card.Kind == protocol.CardEndpoint:
		return "person"
	}
	return ""
}

// Model is the model the peer says it runs (its card's meta "model"), or "".
func (p Peer) Model() string { return p.metaString("model") }

// Cwd is the working directory the peer publishes (its card's meta "cwd"), as it wrote it:
// cotal mcp writes it relative to the project; a reference peer may write a full path.
func (p Peer) Cwd() string { return p.metaString("cwd") }

func (p Peer) metaString(key string) string {
	s, _ := p.Card.Meta[key].(string)
	return s
}

// State is the status to show for the peer: its own status while online, else offline.
func (p Peer) State() protocol.Status {
	if p.Online {
		return p.Status
	}
	return protocol.StatusOffline
}

func (e *Endpoint) presenceBucket(ctx context.Context) (jetstream.KeyValue, error) {
	e.mu.Lock()
	kv := e.presence
	e.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := e.js.KeyValue(ctx, protocol.BucketPresence(e.cfg.Space))
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("%w: space %q has no presence bucket on %s for this credential: the space is not served to it; `cotal up --space %s` adds a space",
				ErrNotProvisioned, e.cfg.Space, e.nc.ConnectedUrlRedacted(), e.cfg.Space)
		}
		return nil, fmt.Errorf("presence bucket: %w", e.refused(err))
	}
	e.mu.Lock()
	e.presence = kv
	e.mu.Unlock()
	return kv, nil
}

// record builds this endpoint's presence record with status st at now.
func (e *Endpoint) record(st protocol.Status, now time.Time) protocol.Presence {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := protocol.Presence{
		Card: e.Card(), Status: st, TS: now.UnixMilli(), LifecycleUID: e.uid,
		Activity: e.activity, ActiveAt: now.UnixMilli(),
		Attention: e.attention, ChannelModes: maps.Clone(e.modes),
	}
	if st != protocol.StatusOffline {
		p.StatusSince = e.since
		for ch := range e.channels {
			p.Channels = append(p.Channels, ch)
		}
		sort.Strings(p.Channels)
	}
	if e.activity != "" {
		p.ActivitySince = e.actSince
	}
	return p
}

func (e *Endpoint) writePresence(ctx context.Context, st protocol.Status) error {
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(e.record(st, time.Now()))
	if err != nil {
		return fmt.Errorf("encode presence: %w", err)
	}
	if _, err := kv.Put(ctx, e.me.String(), b); err != nil {
		return fmt.Errorf("write presence %s: %w", e.me, err)
	}
	return nil
}

// channelsChanged rewrites the presence record of a present endpoint at once, so peers
// see the channels it reads now; a failed write waits for the next heartbeat.
func (e *Endpoint) channelsChanged(ctx context.Context) {
	e.mu.Lock()
	present, st := e.present, e.status
	e.mu.Unlock()
	if !present || !e.nc.IsConnected() {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, e.cfg.Heartbeat)
	defer cancel()
	if err := e.writePresence(wctx, st); err != nil {
		e.log.Debug("presence after a channel change", "err", err)
	}
}

// heartbeat rewrites the presence record every interval until ctx ends.
func (e *Endpoint) heartbeat(ctx context.Context) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	failingSince := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !e.nc.IsConnected() {
			failingSince = time.Time{} // a lost server is reported once, by ConnEvents
			continue
		}
		e.mu.Lock()
		st := e.status
		e.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, e.cfg.Heartbeat)
		err := e.writePresence(wctx, st)
		cancel()
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = time.Now()
			e.log.Warn("presence write failed", "err", err)
		case time.Since(failingSince) > protocol.LivenessWindow:
			e.log.Error("presence-write-stuck", "since", failingSince, "err", err)
		}
	}
}

// SetStatus changes this endpoint's status and publishes it at once. Offline is refused:
// a live endpoint never claims to be offline; Close says that.
func (e *Endpoint) SetStatus(ctx context.Context, st protocol.Status) error {
	if !st.Valid() || st == protocol.StatusOffline {
		return fmt.Errorf("status %q: want idle, waiting or working", st)
	}
	e.mu.Lock()
	if e.status != st {
		e.status, e.since = st, time.Now().UnixMilli()
	}
	joined := e.joined
	e.mu.Unlock()
	if !joined {
		return nil
	}
	return e.writePresence(ctx, st)
}

// SetActivity sets the one-line description of current work and publishes it at once.
// An activity longer than protocol.MaxActivityLength, or not on one line, is refused (see
// protocol.CheckActivity) and changes nothing.
func (e *Endpoint) SetActivity(ctx context.Context, activity string) error {
	if err := protocol.CheckActivity(activity); err != nil {
		return err
	}
	e.mu.Lock()
	if e.activity != activity {
		e.activity, e.actSince = activity, time.Now().UnixMilli()
	}
	st, joined := e.status, e.joined
	e.mu.Unlock()
	if !joined {
		return nil
	}
	return e.writePresence(ctx, st)
}

// SetAttention sets the advisory attention hints this endpoint publishes with its presence
// (the global mode, and the channels it set quiet or muted; a nil or empty map clears
// them) and publishes them at once. They change no routing: the broker still delivers
// everything; a peer reads them to know whether to DM rather than @-mention.
func (e *Endpoint) SetAttention(ctx context.Context, a protocol.Attention, modes map[string]string) error {
	if !a.Valid() {
		return fmt.Errorf("attention %q: want open, dnd or focus", a)
	}
	e.mu.Lock()
	e.attention, e.modes = a, maps.Clone(modes)
	st, joined := e.status, e.joined
	e.mu.Unlock()
	if !joined {
		return nil
	}
	return e.writePresence(ctx, st)
}

// Roster reads every presence record of the space, sorted by name then id, by batch
// Direct Get (no consumer). Records whose card id differs from their key are dropped and
// logged; deleted and purged keys are left out.
func (e *Endpoint) Roster(ctx context.Context) ([]Peer, error) {
	if _, err := e.presenceBucket(ctx); err != nil {
		return nil, err
	}
	recs, err := e.scanBucket(ctx, protocol.BucketPresence(e.cfg.Space))
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	now := time.Now()
	var peers []Peer
	for _, r := range recs {
		if r.op != jetstream.KeyValuePut {
			continue
		}
		if p, ok := e.decodePeer(r.key, r.value, now); ok {
			peers = append(peers, p)
		}
	}
	sortPeers(peers)
	return peers, nil
}

func (e *Endpoint) decodePeer(key string, value []byte, now time.Time) (Peer, bool) {
	p, err := protocol.DecodePresence(key, value)
	if err != nil {
		e.log.Warn("presence record dropped", "key", key, "err", err)
		return Peer{}, false
	}
	return Peer{Presence: p, Online: p.Live(now)}, true
}

func sortPeers(peers []Peer) {
	sort.Slice(peers, func(i, j int) bool {
		a, b := strings.ToLower(peers[i].Card.Name), strings.ToLower(peers[j].Card.Name)
		if a != b {
			return a < b
		}
		return peers[i].Card.ID < peers[j].Card.ID
	})
}

// PeerChange is a change in one peer's effective state seen by WatchPresence.
type PeerChange struct {
	Peer
	Previous protocol.Status // "" when the peer is new to this watch
}

// WatchPresence reports every change of a peer's effective state (joined, status
// changed, went offline by record, by deletion or by silence past the liveness window)
// until ctx ends, when the channel closes. It subscribes to the presence key subjects,
// then reads the bucket by batch Direct Get, and creates no consumer. A record older than
// the one already known for its peer (a put seen live while the snapshot was read) is
// ignored.
//
// The watch is lossless per key and cheap under spam: it keeps the latest raw record of
// each key until it is applied and decodes only what it applies. A key's first change
// after a quiet PresenceEvery applies at once; later writes of that key within the
// interval are held, the latest wins, and applied when it ends. A peer writing its key in
// a loop costs the watch one decode per interval, never another peer's update, and a
// reader that stops reading delays changes but loses no key's latest state.
func (e *Endpoint) WatchPresence(ctx context.Context) (<-chan PeerChange, error) {
	return e.watchPresence(ctx, PresenceEvery, nil)
}

// PresenceEvery is the shortest interval between two changes WatchPresence applies for
// one key.
const PresenceEvery = 100 * time.Millisecond

// watchPresence is WatchPresence with its interval; decodes, when set, counts the
// records decoded (for tests and benchmarks).
func (e *Endpoint) watchPresence(ctx context.Context, every time.Duration, decodes *atomic.Int64) (<-chan PeerChange, error) {
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return nil, err
	}
	bucket := protocol.BucketPresence(e.cfg.Space)
	prefix := kvSubjectPrefix(bucket)
	held := newHeldRecords(every)
	sub, err := e.subscribeBucket(ctx, bucket, func(m *nats.Msg) {
		if r, ok := recordOf(m, prefix); ok {
			held.put(r, time.Now())
		}
	})
	if errors.Is(err, errNoLiveGrant) {
		return e.watchPresenceConsumer(ctx, kv, every, decodes)
	}
	if err != nil {
		return nil, fmt.Errorf("watch presence: %w", err)
	}
	snapshot, err := e.scanBucket(ctx, bucket)
	if err != nil {
		_ = sub.Unsubscribe() // the watch never started
		return nil, fmt.Errorf("watch presence: %w", err)
	}
	out := make(chan PeerChange, 64)
	go func() {
		defer close(out)
		defer func() { _ = sub.Unsubscribe() }() // ctx is over; nothing to report to
		w := newPresenceWatch(ctx, e, out, decodes)
		for _, r := range snapshot {
			if !w.apply(r) {
				return
			}
		}
		w.run(held, nil)
	}()
	return out, nil
}

// watchPresenceConsumer is WatchPresence through a KV watch (an ordered consumer), for a
// credential minted before it could subscribe to the presence key subjects. Its entries
// are held and applied under the same rule as the live path's.
func (e *Endpoint) watchPresenceConsumer(ctx context.Context, kv jetstream.KeyValue, every time.Duration, decodes *atomic.Int64) (<-chan PeerChange, error) {
	kw, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch presence: %w", err)
	}
	held := newHeldRecords(every)
	ended := make(chan struct{})
	go func() { // drains the watcher at once, so a slow reader never stalls the consumer
		defer close(ended)
		for {
			select {
			case <-ctx.Done():
				return
			case entry, ok := <-kw.Updates():
				if !ok {
					return
				}
				if entry != nil { // nil marks the end of the initial values
					held.put(kvRecord{key: entry.Key(), value: entry.Value(), op: entry.Operation(), seq: entry.Revision()}, time.Now())
				}
			}
		}
	}()
	out := make(chan PeerChange, 64)
	go func() {
		defer close(out)
		defer func() { _ = kw.Stop() }() // ctx is over; nothing to report to
		newPresenceWatch(ctx, e, out, decodes).run(held, ended)
	}()
	return out, nil
}

// presenceWatch turns presence records into the changes WatchPresence reports.
type presenceWatch struct {
	ctx     context.Context
	e       *Endpoint
	out     chan<- PeerChange
	known   map[string]Peer
	decodes *atomic.Int64 // nil: not counted
}

func newPresenceWatch(ctx context.Context, e *Endpoint, out chan<- PeerChange, decodes *atomic.Int64) *presenceWatch {
	return &presenceWatch{ctx: ctx, e: e, out: out, known: map[string]Peer{}, decodes: decodes}
}

// run applies the records held as they come due, and sweeps for silent peers, until ctx
// ends or ended closes.
func (w *presenceWatch) run(held *heldRecords, ended <-chan struct{}) {
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-ended:
			return
		case now := <-sweep.C:
			held.prune(now)
			if !w.sweep(now) {
				return
			}
			continue
		case <-held.wake:
		case <-due.C:
		}
		ready, next := held.take(time.Now())
		for _, r := range ready {
			if !w.apply(r) {
				return
			}
		}
		if !next.IsZero() {
			due.Reset(time.Until(next))
		}
	}
}

// apply takes one record; false means ctx ended while reporting.
func (w *presenceWatch) apply(r kvRecord) bool {
	old, had := w.known[r.key]
	if r.op != jetstream.KeyValuePut {
		if !had {
			return true
		}
		old.Online = false
		return w.emit(old)
	}
	if w.decodes != nil {
		w.decodes.Add(1)
	}
	p, ok := w.e.decodePeer(r.key, r.value, time.Now())
	if !ok || (had && p.TS < old.TS) {
		return true
	}
	return w.emit(p)
}

// sweep reports the peers silent past the liveness window at now.
func (w *presenceWatch) sweep(now time.Time) bool {
	for _, p := range w.known {
		if p.Online && !p.Live(now) {
			p.Online = false
			if !w.emit(p) {
				return false
			}
		}
	}
	return true
}

func (w *presenceWatch) emit(p Peer) bool {
	old, had := w.known[p.Card.ID]
	w.known[p.Card.ID] = p
	if had && old.State() == p.State() && old.Activity == p.Activity {
		return true
	}
	ch := PeerChange{Peer: p}
	if had {
		ch.Previous = old.State()
	}
	select {
	case w.out <- ch:
		return true
	case <-w.ctx.Done():
		return false
	}
}
