package client

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// What a durable member was given, by position: per joined durable channel the CHAT
// sequence up to which every post reached Messages(), live or as a hand-off copy. A
// hand-off copy at or below it is a duplicate whatever the dedupe window remembers, and
// the position is confirmed to the delivery daemon (a Go extension, kept in the
// membership row), which then copies no post at or below it and hands it back on the
// next join, so a returning member is not shown again what it read.
//
// A live copy carries no sequence. The live position comes from the order the broker
// keeps: it routes a post to subscribers before the stream stores it, so once the CHAT
// stream's last sequence L is read, every post of the channel up to L is already on this
// connection, and once the subscription's handler has handled everything received by
// then, every post in (watermark at subscribe, L] has been surfaced. Where that order is
// not known to hold (the connection is not on the stream leader's server) or the
// subscription dropped messages (slow consumer), no live position is claimed.

// posTrack is the position record of one joined durable channel.
type posTrack struct {
	channel  string
	sub      *nats.Subscription
	from     uint64 // live reading covers posts after this sequence (the watermark at subscribe)
	join     uint64 // the membership's join cursor
	gen      uint64 // the membership's generation
	row      uint64 // the membership's confirmed position when joined
	live     uint64 // every post in (from, live] was surfaced live
	reported uint64 // the last position the daemon accepted
	broken   bool   // the subscription dropped messages: live reading is incomplete
}

// positions is the endpoint's position state.
type positions struct {
	mu       sync.Mutex
	done     map[*nats.Subscription]uint64 // live messages handled, per subscription
	wake     chan struct{}                 // closed when a handled count moves, if someone waits
	tracks   map[string]*posTrack          // joined durable channel -> its record
	rows     map[string]uint64             // membership channel -> position listed at connect
	handoff  map[string]uint64             // concrete channel -> highest sequence of a hand-off copy surfaced
	kick     chan struct{}
	start    sync.Once
	refused  bool       // the daemon does not take confirmPosition (a reference daemon)
	confirms sync.Mutex // one confirmation round at a time
}

func newPositions() *positions {
	return &positions{done: map[*nats.Subscription]uint64{}, tracks: map[string]*posTrack{},
		rows: map[string]uint64{}, handoff: map[string]uint64{}, kick: make(chan struct{}, 1)}
}

// liveHandled counts one live message of sub as handled (surfaced or dropped).
func (e *Endpoint) liveHandled(sub *nats.Subscription) {
	p := e.pos
	p.mu.Lock()
	p.done[sub]++
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	tracked := len(p.tracks) > 0
	p.mu.Unlock()
	if tracked {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// track starts the position record of a durable channel whose backstop is established.
func (e *Endpoint) track(channel string, from, join, gen, row uint64) {
	e.mu.Lock()
	sub := e.channels[channel]
	e.mu.Unlock()
	if sub == nil {
		return
	}
	p := e.pos
	p.mu.Lock()
	p.tracks[channel] = &posTrack{channel: channel, sub: sub, from: from, join: join, gen: gen, row: row, reported: row}
	p.mu.Unlock()
	p.start.Do(func() {
		e.wg.Add(1)
		go e.reportLoop()
	})
}

// untrack drops the position record of a channel left.
func (e *Endpoint) untrack(channel string) {
	p := e.pos
	p.mu.Lock()
	if t := p.tracks[channel]; t != nil {
		delete(p.done, t.sub)
		delete(p.tracks, channel)
	}
	p.mu.Unlock()
}

// seedRows records the positions of this incarnation's memberships, so hand-off copies
// that arrive before a channel is joined again are judged by them.
func (e *Endpoint) seedRows(list []protocol.MembershipInfo) {
	p := e.pos
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range list {
		p.rows[m.Channel] = max(p.rows[m.Channel], m.Position)
	}
}

// givenAt reports whether the post at seq on concrete channel ch was given already: at or
// below a confirmed position of a membership matching ch, inside the live-read interval
// of a joined channel matching ch, or at or below the last hand-off copy surfaced (copies
// of ch arrive in CHAT order). seq 0 (a frame without a sequence) is never judged given.
func (p *positions) givenAt(ch string, seq uint64) bool {
	if seq == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq <= p.handoff[ch] {
		return true
	}
	for pattern, at := range p.rows {
		if seq <= at && protocol.ChannelMatches(pattern, ch) {
			return true
		}
	}
	for _, t := range p.tracks {
		if protocol.ChannelMatches(t.channel, ch) && (seq <= t.row || (t.from < seq && seq <= t.live)) {
			return true
		}
	}
	return false
}

// liveMayCover reports whether a live confirmation could show the post at seq on ch
// given: a joined channel matching ch reads it live and has not confirmed that far.
func (p *positions) liveMayCover(ch string, seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tracks {
		if !t.broken && t.from < seq && seq > t.live && protocol.ChannelMatches(t.channel, ch) {
			return true
		}
	}
	return false
}

// surfacedHandoff records that the hand-off copy at seq on concrete channel ch reached
// Messages(). A channel's copies arrive in CHAT order (a new membership's catch-up copies
// only posts its live subscription also read), so every copy of ch below seq came first.
func (p *positions) surfacedHandoff(ch string, seq uint64) {
	p.mu.Lock()
	p.handoff[ch] = max(p.handoff[ch], seq)
	p.mu.Unlock()
}

// received is how many messages sub has taken off the connection: those handed to its
// handler and those queued for it, read together (no hand-over between the two reads).
func received(sub *nats.Subscription) (uint64, bool) {
	for {
		d1, err := sub.Delivered()
		if err != nil {
			return 0, false
		}
		q, _, err := sub.Pending()
		if err != nil {
			return 0, false
		}
		d2, err := sub.Delivered()
		if err != nil {
			return 0, false
		}
		if d1 == d2 {
			return uint64(d1) + uint64(q), true
		}
	}
}

// confirmLive moves the live position of every tracked channel up to CHAT's last
// sequence once the live handler has handled every message received before it was read.
func (e *Endpoint) confirmLive(ctx context.Context) {
	p := e.pos
	p.confirms.Lock()
	defer p.confirms.Unlock()
	stream := protocol.StreamChat(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		e.log.Debug("live position: stream info", "err", err)
		return
	}
	info := s.CachedInfo()
	if info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != e.nc.ConnectedServerName() {
		return // the routing-before-storing order is only known on the stream leader's server
	}
	last := info.State.LastSeq
	type want struct {
		t      *posTrack
		target uint64
	}
	var wants []want
	p.mu.Lock()
	for _, t := range p.tracks {
		if t.broken || t.live >= last {
			continue
		}
		if n, err := t.sub.Dropped(); err != nil || n > 0 {
			t.broken = true // a slow consumer lost posts: this subscription proves nothing
			continue
		}
		if n, ok := received(t.sub); ok {
			wants = append(wants, want{t, n})
		}
	}
	p.mu.Unlock()
	for _, w := range wants {
		for {
			p.mu.Lock()
			if p.done[w.t.sub] >= w.target {
				w.t.live = max(w.t.live, last)
				p.mu.Unlock()
				break
			}
			if p.wake == nil {
				p.wake = make(chan struct{})
			}
			wake := p.wake
			p.mu.Unlock()
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}
}

// reportLoop confirms positions to the daemon after live traffic, at most once per
// PositionEvery, until the endpoint closes.
func (e *Endpoint) reportLoop() {
	defer e.wg.Done()
	p := e.pos
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-p.kick:
		}
		t := time.NewTimer(e.cfg.PositionEvery)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		e.confirmAndReport(e.ctx)
	}
}

// confirmAndReport confirms the live positions and sends the daemon every position that
// moved.
func (e *Endpoint) confirmAndReport(ctx context.Context) {
	p := e.pos
	p.mu.Lock()
	none := len(p.tracks) == 0
	p.mu.Unlock()
	if none {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DeliveryTimeout)
	defer cancel()
	e.confirmLive(ctx)
	uid := e.lifecycleUID()
	type report struct {
		t   *posTrack
		pos uint64
	}
	var out []report
	p.mu.Lock()
	if p.refused || uid == "" {
		p.mu.Unlock()
		return
	}
	for _, t := range p.tracks {
		// Given for sure: what the row confirmed and the hand-off copies surfaced (every
		// copy up to the last one, in CHAT order); the live interval adds to it only once
		// it joins on, i.e. nothing before the subscribe is missing.
		pos := max(t.row, p.handoff[t.channel])
		if t.live > 0 && t.from <= max(pos, t.join) {
			pos = max(pos, t.live)
		}
		if pos > t.reported && pos > t.join {
			out = append(out, report{t, pos})
		}
	}
	p.mu.Unlock()
	for _, r := range out {
		_, err := e.deliveryRequest(ctx, protocol.OpConfirmPosition, protocol.ConfirmPositionArgs{Channel: r.t.channel,
			Generation: r.t.gen, LifecycleUID: uid, Position: r.pos})
		if err != nil {
			if strings.Contains(err.Error(), "not supported") {
				p.mu.Lock()
				p.refused = true
				p.mu.Unlock()
				return
			}
			e.log.Debug("confirm position", "channel", r.t.channel, "err", err)
			continue
		}
		p.mu.Lock()
		r.t.reported = max(r.t.reported, r.pos)
		p.mu.Unlock()
	}
}
