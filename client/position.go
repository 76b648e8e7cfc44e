package client

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
// keeps, which is looser than it looks: a publish is handed to the stream (which stores
// it from a queue, on another goroutine) before the broker has routed it to every
// subscriber, so the stream can hold a post at L, and answer a read of its last sequence
// with L, while the post is still on its way to this connection. A last sequence L read
// by one confirmation is therefore claimed only by a later one, liveLag or more after it
// was read and once the subscription's handler has handled everything received by then:
// every post of the channel up to L has reached this connection by that time (its
// routing began before L was read), so every post in (watermark at subscribe, L] has
// been surfaced, and counted in the window that records how many had been. Where the
// routing order is not known to hold (the connection is not on the stream leader's
// server) or the subscription dropped messages (slow consumer), no live position is
// claimed.
//
// The watermark is not exact: a post routed just before the subscription existed can be
// stored just after the watermark was read (the stream stores from a queue), so it lies
// in the interval without ever reaching this connection. A hand-off copy is therefore
// judged by the live interval only once the dedupe window may have forgotten ids
// surfaced since the join; until then its id alone says whether it was shown.
//
// What reached Messages() is not yet what the application took: only a position whose
// posts were all taken is confirmed to the daemon (a window), so a post still unread in
// the inbox at Close is copied to the next incarnation. The inbox is FIFO: when s
// messages were surfaced in all and n are still queued, the first s-n were taken; a
// window records how many had been surfaced once its posts all were, and is taken when
// that many were. A hand-off copy of a post surfaced live but not yet taken is held
// unacked until it is, and naked at Close, so it comes back to the next incarnation.
//
// An application that keeps messages after taking them from Messages(), as an MCP server
// keeps them until the model is given them, calls TakeOnAck: a message then counts as
// taken only once acked (Incoming.Ack, live copies included), and one handed back never
// does, so no confirmed position covers a post still unread when the endpoint closes,
// nor any post surfaced after it (those are copied again: shown twice rather than lost).

// window is a position whose posts were all surfaced once need messages were.
type window struct {
	pos  uint64
	need uint64
}

// heldCopy is a hand-off copy of a post surfaced live and not yet taken, or one handed
// back (need ^0), of the post at seq on concrete channel ch.
type heldCopy struct {
	need uint64
	msg  jetstream.Msg
	in   *Incoming // the copy the application handed back (HandBack), settled with it; else nil
	ch   string
	seq  uint64
}

// handedBack is the need of a held copy handed back: never taken.
const handedBack = ^uint64(0)

// posTrack is the position record of one joined durable channel.
type posTrack struct {
	channel  string
	sub      *nats.Subscription
	from     uint64    // live reading covers posts after this sequence (the watermark at subscribe)
	join     uint64    // the membership's join cursor
	gen      uint64    // the membership's generation
	row      uint64    // the membership's confirmed position when joined
	live     uint64    // every post in (from, live] was surfaced live
	seen     uint64    // CHAT's last sequence read by a confirmation, claimed as live by a later one
	seenAt   time.Time // when seen was read
	reported uint64    // the last position the daemon accepted
	broken   bool      // the subscription dropped messages: live reading is incomplete
	cut      bool      // a post it received was not shown (the endpoint closes): same
	windows  []window  // live positions not yet all taken, in order
	taken    uint64    // every post in (from, taken] was taken by the application
	idMark   uint64    // the dedupe window's mark at the join
}

// positions is the endpoint's position state.
type positions struct {
	mu       sync.Mutex
	done     map[*nats.Subscription]uint64 // live messages handled, per subscription
	wake     chan struct{}                 // closed when a handled count moves, if someone waits
	tracks   map[string]*posTrack          // joined durable channel -> its record
	rows     map[string]uint64             // membership channel -> position listed at connect
	hseen    map[string]*seqSet            // concrete channel -> sequences of the hand-off copies surfaced
	hwin     map[string][]window           // concrete channel -> hand-off positions not yet all taken
	htaken   map[string]uint64             // concrete channel -> highest hand-off copy taken
	held     []heldCopy                    // copies acked once taken (settle)
	returned bool                          // returnUnsettled ran: a copy held or handed back now is naked at once
	owed     int                           // copies pending in the hand-off durable at its bind (delivered earlier)
	owedTo   uint64                        // the hand-off durable's last delivered sequence at its bind
	repaid   map[uint64]struct{}           // hand-off sequences at or below owedTo settled by this session
	surfaced atomic.Uint64                 // messages handed to Messages(), from every source
	kick     chan struct{}
	lastLive atomic.Int64 // when a live message of a tracked channel was last handled (Unix ns)
	start    sync.Once
	refused  bool                // the daemon does not take confirmPosition (a reference daemon)
	confirms sync.Mutex          // one confirmation round at a time
	ids      *dedupe             // the endpoint's id window
	onAck    atomic.Bool         // TakeOnAck: a message is taken once acked
	open     map[uint64]struct{} // under onAck: places (1-based, in surfacing order) of messages surfaced and not acked
	now      func() time.Time    // the clock of the live claims (tests set it)
}

// liveLag is how long after a confirmation read CHAT's last sequence a later one may claim
// it as read live: the broker routes a post to the channel's subscribers within it once
// the stream has stored the post (see the package comment above).
const liveLag = 100 * time.Millisecond

func newPositions(ids *dedupe) *positions {
	return &positions{ids: ids, done: map[*nats.Subscription]uint64{}, tracks: map[string]*posTrack{},
		rows: map[string]uint64{}, hseen: map[string]*seqSet{}, hwin: map[string][]window{},
		htaken: map[string]uint64{}, repaid: map[uint64]struct{}{}, kick: make(chan struct{}, 1), open: map[uint64]struct{}{}, now: time.Now}
}

// claimDue is when the earliest last sequence read and not yet claimed live may be
// claimed (ok false when none waits).
func (p *positions) claimDue() (due time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tracks {
		if !t.broken && t.seen > t.live && (!ok || t.seenAt.Add(liveLag).Before(due)) {
			due, ok = t.seenAt.Add(liveLag), true
		}
	}
	return due, ok
}

// TakeOnAck makes a message taken from Messages() count as taken by the application only
// once it is acked (Incoming.Ack, which then also covers live and historical copies); a
// message handed back (HandBack) or never acked is not taken. What is taken decides the
// channel positions the endpoint confirms to the delivery daemon, which copies to the
// next incarnation every post past them: without TakeOnAck, a post that reached the
// endpoint live and that the application still holds unhandled when it closes counts as
// read, and is lost. Call it before Join; it cannot be undone.
func (e *Endpoint) TakeOnAck() {
	if e.pos != nil {
		e.pos.onAck.Store(true)
	}
}

// openUntilAck records, under TakeOnAck, that in is about to be surfaced and is not taken
// until acked; it returns the undo for a surfacing that did not happen. It runs under
// e.order, as every surfacing does, so in's place is exact.
func (e *Endpoint) openUntilAck(in *Incoming) (unsurfaced func()) {
	p := e.pos
	if p == nil || !p.onAck.Load() {
		return func() {}
	}
	place := p.surfaced.Load() + 1
	p.mu.Lock()
	p.open[place] = struct{}{}
	p.mu.Unlock()
	done := func() {
		p.mu.Lock()
		delete(p.open, place)
		p.mu.Unlock()
	}
	in.handled = func() {
		done()
		select { // the daemon may now be told of a position the ack completed
		case p.kick <- struct{}{}:
		default:
		}
	}
	return done
}

// firstOpen is the place of the earliest surfaced message not acked under TakeOnAck, or
// 0 when there is none; p.mu is held.
func (p *positions) firstOpen() uint64 {
	var first uint64
	for place := range p.open {
		if first == 0 || place < first {
			first = place
		}
	}
	return first
}

// noteSurfaced counts one message handed to Messages().
func (e *Endpoint) noteSurfaced() {
	if e.pos != nil { // an endpoint made without New (tests) tracks nothing
		e.pos.surfaced.Add(1)
	}
}

// taken is how many surfaced messages the application has taken from Messages(), at
// least: the count is read before the queue, so a message surfaced in between is only
// counted as not taken. Under TakeOnAck it stops before the first message not acked.
func (e *Endpoint) taken() uint64 {
	s := e.pos.surfaced.Load()
	n := uint64(len(e.inbox))
	if n > s {
		return 0
	}
	t := s - n
	if e.pos.onAck.Load() {
		e.pos.mu.Lock()
		if first := e.pos.firstOpen(); first > 0 {
			t = min(t, first-1)
		}
		e.pos.mu.Unlock()
	}
	return t
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
		p.lastLive.Store(time.Now().UnixNano())
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// liveCut records that a live post sub received was not shown (the endpoint closes
// first): no live position of its channel is claimed from then on, so the daemon copies
// the post to the next incarnation. It runs before the post is counted handled.
func (e *Endpoint) liveCut(sub *nats.Subscription) {
	if e.pos == nil {
		return
	}
	p := e.pos
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.tracks {
		if t.sub == sub {
			t.cut = true
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
	p.tracks[channel] = &posTrack{channel: channel, sub: sub, from: from, join: join, gen: gen, row: row, reported: row,
		idMark: p.ids.mark()}
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
// of a joined channel matching ch, or a hand-off copy of it was surfaced. Copies of ch
// mostly arrive in CHAT order, but not always: one delivered to an earlier session that
// never settled it (killed, or closed with it in flight) comes back after its ack wait,
// behind later copies; so a copy below the last one surfaced is not given for that, only
// when its own sequence was surfaced. seq 0 (a frame without a sequence) is never judged
// given.
func (p *positions) givenAt(ch string, seq uint64) bool {
	if seq == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hseen[ch].has(seq) {
		return true
	}
	for pattern, at := range p.rows {
		if seq <= at && protocol.ChannelMatches(pattern, ch) {
			return true
		}
	}
	for _, t := range p.tracks {
		if protocol.ChannelMatches(t.channel, ch) && (seq <= t.row || (t.from < seq && seq <= t.live && p.forgets(t))) {
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
		if !t.broken && t.from < seq && seq > t.live && protocol.ChannelMatches(t.channel, ch) && p.forgets(t) {
			return true
		}
	}
	return false
}

// forgets reports whether the id window may have forgotten a post surfaced live since
// t's join, so only the live interval can say it was given (the package comment).
func (p *positions) forgets(t *posTrack) bool {
	return !p.ids.holdsSince(t.idMark)
}

// surfacedHandoff records that the hand-off copy at seq on concrete channel ch reached
// Messages(). Its window says when it was taken; the position confirmed for ch rises to a
// copy's sequence only while no copy of ch below it waits to be taken (report), since
// copies do not always arrive in CHAT order (givenAt).
func (p *positions) surfacedHandoff(ch string, seq uint64) {
	need := p.surfaced.Load() // counts this copy: it was surfaced before
	p.mu.Lock()
	s := p.hseen[ch]
	if s == nil {
		s = &seqSet{}
		p.hseen[ch] = s
	}
	s.add(seq)
	p.hwin[ch] = append(p.hwin[ch], window{pos: seq, need: need})
	p.mu.Unlock()
}

// owe records, at the bind of the hand-off durable, how many copies it holds delivered
// and not acked (pending) and its last delivered sequence (to): copies an earlier session
// of this incarnation was given and did not settle, which come back to this one (at once
// when naked, else after the ack wait) behind copies stored later. Until every one came
// back and was settled, no position past the membership's row is confirmed (report): the
// daemon's row would cover such a copy, and a later session drop it as given.
func (p *positions) owe(pending int, to uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owed, p.owedTo = pending, to
}

// repay records that the hand-off copy at sequence dseq of the durable was settled by
// this session (surfaced, judged given, or dropped), not handed back.
func (p *positions) repay(dseq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if dseq > 0 && dseq <= p.owedTo && len(p.repaid) < p.owed {
		p.repaid[dseq] = struct{}{}
	}
}

// owing reports whether copies pending at the bind have not all come back; p.mu is held.
func (p *positions) owing() bool {
	return len(p.repaid) < p.owed
}

// recheckOwed reads the hand-off durable while copies pending at its bind have not all
// come back: once its ack floor reached the last copy delivered before the bind, every
// one of them was acked (an earlier session's ack that arrived after the bind), and none
// is still to come.
func (e *Endpoint) recheckOwed(ctx context.Context) {
	p := e.pos
	p.mu.Lock()
	owing, to := p.owing(), p.owedTo
	p.mu.Unlock()
	e.mu.Lock()
	name := e.handoff
	e.mu.Unlock()
	if !owing || name == "" {
		return
	}
	c, err := e.js.Consumer(ctx, protocol.StreamDLV(e.cfg.Space), name)
	if err != nil {
		e.log.Debug("hand-off durable info", "consumer", name, "err", err)
		return
	}
	if c.CachedInfo().AckFloor.Stream >= to {
		p.mu.Lock()
		p.owed = 0
		p.mu.Unlock()
	}
}

// waitingBelow is the lowest sequence of a hand-off copy on a channel matching pattern
// that this session surfaced and the application has not taken, or handed back (0 when
// there is none): no position confirmed for pattern may reach it. p.mu is held, after
// settleTaken.
func (p *positions) waitingBelow(pattern string) uint64 {
	var low uint64
	note := func(seq uint64) {
		if seq > 0 && (low == 0 || seq < low) {
			low = seq
		}
	}
	for ch, ws := range p.hwin {
		if protocol.ChannelMatches(pattern, ch) {
			for _, w := range ws {
				note(w.pos)
			}
		}
	}
	for _, h := range p.held {
		if h.need == handedBack && protocol.ChannelMatches(pattern, h.ch) {
			note(h.seq)
		}
	}
	return low
}

// seqSet is the sequences of the hand-off copies of one channel surfaced this session,
// ascending; it keeps the newest maxSeen (one forgotten is only judged by the id window,
// rows and live interval: at worst shown twice).
type seqSet struct{ seqs []uint64 }

// maxSeen is how many hand-off sequences a channel's seqSet keeps.
const maxSeen = 8192

func (s *seqSet) has(seq uint64) bool {
	if s == nil {
		return false
	}
	i := sort.Search(len(s.seqs), func(i int) bool { return s.seqs[i] >= seq })
	return i < len(s.seqs) && s.seqs[i] == seq
}

func (s *seqSet) add(seq uint64) {
	i := sort.Search(len(s.seqs), func(i int) bool { return s.seqs[i] >= seq })
	if i < len(s.seqs) && s.seqs[i] == seq {
		return
	}
	s.seqs = append(s.seqs, 0)
	copy(s.seqs[i+1:], s.seqs[i:])
	s.seqs[i] = seq
	if len(s.seqs) > maxSeen {
		s.seqs = append(s.seqs[:0], s.seqs[len(s.seqs)-maxSeen:]...)
	}
}

// settleTaken moves the taken positions up to the windows the application took all of
// (taken messages), and returns the held copies now taken, to ack. p.mu is held.
func (p *positions) settleTaken(taken uint64) []jetstream.Msg {
	for _, t := range p.tracks {
		n := 0
		for _, w := range t.windows {
			if w.need > taken {
				break
			}
			t.taken = max(t.taken, w.pos)
			n++
		}
		t.windows = t.windows[n:]
	}
	for ch, ws := range p.hwin {
		n := 0
		for _, w := range ws {
			if w.need > taken {
				break
			}
			p.htaken[ch] = max(p.htaken[ch], w.pos)
			n++
		}
		if n == len(ws) {
			delete(p.hwin, ch)
		} else {
			p.hwin[ch] = ws[n:]
		}
	}
	var acks []jetstream.Msg
	n := 0
	for _, h := range p.held {
		if h.need <= taken {
			acks = append(acks, h.msg)
		} else {
			p.held[n] = h
			n++
		}
	}
	p.held = p.held[:n]
	return acks
}

// holdCopy decides the ack of a hand-off copy of the post at seq on ch found given: a
// copy of a post surfaced live and not yet taken by the application is held (acked once
// it is taken, naked at Close, or at once once Close handed the held copies back) and
// holdCopy reports true; otherwise the caller acks it.
func (e *Endpoint) holdCopy(ch string, seq uint64, m jetstream.Msg) bool {
	held, returned := e.keepCopy(ch, seq, m)
	if held && returned {
		e.nakLate(m)
	}
	return held
}

// keepCopy is holdCopy's judgement: whether the copy is held, and whether Close already
// handed the held copies back (then it was not kept: the caller naks it).
func (e *Endpoint) keepCopy(ch string, seq uint64, m jetstream.Msg) (held, returned bool) {
	p := e.pos
	taken := e.taken()
	p.mu.Lock()
	defer p.mu.Unlock()
	hold := func(need uint64) (bool, bool) {
		if !p.returned {
			p.held = append(p.held, heldCopy{need: need, msg: m, ch: ch, seq: seq})
		}
		return true, p.returned
	}
	for _, t := range p.tracks {
		if !protocol.ChannelMatches(t.channel, ch) || seq <= t.from || seq <= t.taken {
			continue
		}
		for _, w := range t.windows { // the first window holding seq
			if seq <= w.pos {
				if w.need <= taken {
					return false, false
				}
				return hold(w.need)
			}
		}
		if seq > t.live && seq > t.row {
			// Surfaced live (its id says so) past the confirmed live position, so no window
			// says whether it was taken: the daemon copied it before it heard this member
			// read live. The live copy is among the messages surfaced by now; acking this
			// copy before they are all taken would lose the post if the endpoint closes
			// with it unread (a live copy cannot be handed back).
			need := p.surfaced.Load()
			if need <= taken {
				return false, false
			}
			return hold(need)
		}
	}
	return false, false
}

// handBack keeps a hand-off copy of the post at seq on ch that the closing endpoint did
// not surface, to be naked by returnUnsettled with the others; once that ran (a copy the
// hand-off consumer handed over after Close returned the rest), it is naked at once.
func (e *Endpoint) handBack(ch string, seq uint64, m jetstream.Msg) {
	p := e.pos
	p.mu.Lock()
	returned := p.returned
	if !returned {
		p.held = append(p.held, heldCopy{need: handedBack, msg: m, ch: ch, seq: seq})
	}
	p.mu.Unlock()
	if returned {
		e.nakLate(m)
	}
}

// nakLate naks a copy that reached the endpoint after Close handed the others back, so
// the next incarnation is given it at once rather than after its ack wait.
func (e *Endpoint) nakLate(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		e.log.Debug("nak copy handed back after close", "subject", m.Subject(), "err", err)
	}
}

// HandBack returns a durable copy the application took from Messages() but did not
// handle (it is closing, and the copy was never shown to anyone). The copy is naked at
// Close, once the endpoint no longer consumes, with the copies still unread in
// Messages(), so the broker redelivers it at once to the next incarnation. A Nak now
// would be redelivered to this closing endpoint (and a channel's hand-off copy, whose id
// the live copy shares, dropped as a duplicate). After Close the copy is naked at
// once. A live copy, or one already settled, is left alone.
func (e *Endpoint) HandBack(in *Incoming) {
	if in == nil || in.msg == nil {
		return
	}
	p := e.pos
	p.mu.Lock()
	if !p.returned {
		p.held = append(p.held, heldCopy{need: handedBack, msg: in.msg, in: in, ch: in.Subject.Channel, seq: in.Seq})
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if err := in.Nak(); err != nil {
		e.log.Debug("nak handed-back copy", "id", in.ID, "err", err)
	}
}

// unsettled is a durable copy to hand back at Close, with where it sits in its durable.
type unsettled struct {
	in               *Incoming // the unread Incoming, if it reached Messages()
	msg              jetstream.Msg
	stream, consumer string
	seq              uint64
}

// heldCopies returns the hand-off copies held now (acked once their posts are taken, or
// handed back), for the keeper to mark in progress.
func (p *positions) heldCopies() []jetstream.Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]jetstream.Msg, 0, len(p.held))
	for _, h := range p.held {
		out = append(out, h.msg)
	}
	return out
}

// returnUnsettled naks, at Close, every durable copy this endpoint holds unacked: held
// hand-off copies of posts not taken, copies handed back while closing, and copies unread
// in Messages(). Without it such a copy would come back only after its ack wait, behind
// later copies. The broker redelivers naked copies first, in the order it queued them, so
// they are naked per durable in stream order (for the hand-off durable the order the
// daemon stored them: CHAT order per channel), and the last nak of each durable waits for
// the broker's answer, so the next incarnation, connecting after Close, is given them
// first and in order.
//
// One broker behaviour needs care: a redelivery the broker takes up while the only pull
// request it lists is one whose subscriber is gone (this endpoint's, unsubscribed above)
// goes back to the end of its redelivery queue, behind the copies naked after it. Reading
// the durable's info first makes the broker drop such requests (nats-server 2.10 to
// 2.15: consumer info processes the waiting requests), so nothing is taken up until the
// next incarnation pulls.
func (e *Endpoint) returnUnsettled() {
	var out []unsettled
	add := func(in *Incoming, m jetstream.Msg) {
		u := unsettled{in: in, msg: m}
		if md, err := m.Metadata(); err == nil {
			u.stream, u.consumer, u.seq = md.Stream, md.Consumer, md.Sequence.Stream
		}
		out = append(out, u)
	}
	p := e.pos
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.returned = true
	p.mu.Unlock()
	for _, h := range held {
		add(h.in, h.msg)
	}
	for {
		select {
		case in := <-e.inbox:
			if in.msg != nil {
				add(in, in.msg)
			}
			continue
		default:
		}
		break
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].consumer != out[j].consumer {
			return out[i].consumer < out[j].consumer
		}
		return out[i].seq < out[j].seq
	})
	up := e.nc.IsConnected() // without the broker the naks are lost anyway: no waiting
	for i, u := range out {
		first := up && (i == 0 || out[i-1].consumer != u.consumer)
		last := i == len(out)-1 || out[i+1].consumer != u.consumer
		if first && u.consumer != "" {
			ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DeliveryTimeout)
			if _, err := e.js.Consumer(ctx, u.stream, u.consumer); err != nil {
				e.log.Debug("durable info before handing copies back", "consumer", u.consumer, "err", err)
			}
			cancel()
		}
		var err error
		if up && last && u.msg.Reply() != "" {
			// Acks are applied in the order sent: the answer to this one says all were.
			_, err = e.nc.Request(u.msg.Reply(), []byte("-NAK"), e.cfg.DeliveryTimeout)
		} else {
			err = u.msg.Nak()
		}
		if err != nil {
			e.log.Debug("nak unsettled copy", "consumer", u.consumer, "seq", u.seq, "err", err)
		}
		if u.in != nil {
			u.in.settled()
		}
	}
}

// received is how many messages sub has taken off the connection: those handed to its
// handler and those queued for it, read together (no hand-over between the two reads).
// It may count one message twice: nats.go counts a message delivered when it hands it to
// the handler but takes it off the queue's count only once the handler has returned and
// its loop comes back, so while (or just after) the handler runs, that message is in
// both counts. It never counts less than were received.
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
	p.mu.Lock()
	none := len(p.tracks) == 0
	p.mu.Unlock()
	if none {
		return
	}
	p.confirms.Lock()
	defer p.confirms.Unlock()
	stream := protocol.StreamChat(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		e.log.Debug("live position: stream info", "err", err)
		return
	}
	e.confirmLiveAt(ctx, s.CachedInfo())
}

// confirmLiveAt is confirmLive with CHAT's info already read (Close reads it once for
// this and noteLeaving); the caller holds p.confirms, or, at Close, is the last to
// confirm.
func (e *Endpoint) confirmLiveAt(ctx context.Context, info *jetstream.StreamInfo) {
	p := e.pos
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
		if t.broken || (t.live >= last && t.seen <= t.live) {
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
			// received may have counted the message in the handler twice (see received):
			// once all but one are handled, what was received by now, handled in full,
			// also settles it, and the loop's count catches up within moments.
			p.mu.Lock()
			done := p.done[w.t.sub]
			p.mu.Unlock()
			if done+1 == w.target {
				if n, ok := received(w.t.sub); ok && n <= done {
					w.target = done
				}
			}
			p.mu.Lock()
			if p.done[w.t.sub] >= w.target {
				now := p.now()
				if w.t.cut {
					w.t.broken = true // a post up to last may be one not shown
				} else {
					// What an earlier confirmation read is claimed once liveLag has passed
					// since: every post up to it was routed here before last was read, so it
					// was handled, and the surfaced ones are counted. last itself may still
					// be on its way (the package comment), so it waits for a later claim.
					if w.t.seen > w.t.live && !now.Before(w.t.seenAt.Add(liveLag)) {
						w.t.live = w.t.seen
						w.t.windows = append(w.t.windows, window{pos: w.t.seen, need: p.surfaced.Load()})
					}
					if last > w.t.seen {
						w.t.seen, w.t.seenAt = last, now
					}
				}
				p.mu.Unlock()
				break
			}
			if p.wake == nil {
				p.wake = make(chan struct{})
			}
			wake := p.wake
			near := p.done[w.t.sub]+1 == w.target
			p.mu.Unlock()
			var recheck *time.Timer
			var again <-chan time.Time
			if near { // no later message may come to wake this: look again shortly
				recheck = time.NewTimer(time.Millisecond)
				again = recheck.C
			}
			select {
			case <-wake:
			case <-again:
			case <-ctx.Done():
			}
			if recheck != nil {
				recheck.Stop()
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// reportLoop confirms positions to the daemon after live traffic, and at least every
// keepAlive periods while connected (the daemon counts the member as reading live while it
// hears from it, and defers its copies), until the endpoint closes. After live traffic it
// confirms once the traffic pauses (see settle), so the daemon, which holds a round's
// copies for this member until its position covers them, is answered as soon as a burst
// has been read rather than a full period later.
func (e *Endpoint) reportLoop() {
	defer e.wg.Done()
	p := e.pos
	keep := time.NewTicker(keepAlive * e.cfg.PositionEvery)
	defer keep.Stop()
	var last time.Time // the last confirmation
	var claim *time.Timer
	defer func() {
		if claim != nil {
			claim.Stop()
		}
	}()
	for {
		var due <-chan time.Time // a last sequence read waits to be claimed: confirm again then
		if claim != nil {
			due = claim.C
		}
		select {
		case <-e.ctx.Done():
			return
		case <-keep.C:
		case <-due:
		case <-p.kick:
			if !e.settle(last) {
				return
			}
		}
		if claim != nil {
			claim.Stop()
			claim = nil
		}
		select { // the traffic up to here is confirmed now: a kick from before is spent
		case <-p.kick:
		default:
		}
		last = time.Now()
		e.confirmAndReport(e.ctx)
		if at, ok := p.claimDue(); ok {
			claim = time.NewTimer(max(time.Until(at), 0))
		}
	}
}

// settle waits, once live traffic has begun, until it has paused for an eighth of
// PositionEvery or a whole PositionEvery has passed, and in any case until a quarter of
// PositionEvery has passed since the last confirmation (last): a burst is confirmed as
// soon as it ends, steady traffic once per period, and confirmations are never closer
// than a quarter period. It reports false when the endpoint closes first.
func (e *Endpoint) settle(last time.Time) bool {
	every := e.cfg.PositionEvery
	quiet, gap := every/8, every/4
	due := time.Now().Add(every)
	for {
		now := time.Now()
		var wait time.Duration
		if idle := now.Sub(time.Unix(0, e.pos.lastLive.Load())); idle < quiet && now.Before(due) {
			wait = min(quiet-idle, due.Sub(now))
		}
		wait = max(wait, last.Add(gap).Sub(now))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// keepAlive is how many PositionEvery periods pass at most between two confirmations
// while connected (1 s by default, within the daemon's 5 s reader ttl).
const keepAlive = 10

// confirmAndReport confirms the live positions and sends the daemon the position of every
// tracked channel that the application took (even when it did not move: the daemon keeps
// counting the member as reading live), and waits for its answers.
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
	e.recheckOwed(ctx)
	e.report(false)(ctx)
}

// report acks the held hand-off copies whose posts the application took and sends the
// daemon the position of every tracked channel, all at once; the func it returns reads
// the answers (each up to DeliveryTimeout from its send). closing says the endpoint
// closes: the daemon then stops deferring its copies. Close sends its report before it
// stops its consumers and reads the answers after, so the daemon's work overlaps its own.
func (e *Endpoint) report(closing bool) (answers func(context.Context)) {
	p := e.pos
	uid := e.lifecycleUID()
	type report struct {
		t   *posTrack
		pos uint64
		ask *pendingAsk
	}
	var out []report
	taken := e.taken()
	p.mu.Lock()
	acks := p.settleTaken(taken)
	if p.refused || uid == "" {
		p.mu.Unlock()
		e.ackAll(acks)
		return func(context.Context) {}
	}
	owing := p.owing()
	for _, t := range p.tracks {
		// Given for sure: what the row confirmed and the hand-off copies the application
		// took (every copy up to the last one, in CHAT order); the live interval taken adds
		// to it only once it joins on, i.e. nothing before the subscribe is missing.
		pos := max(t.row, p.htaken[t.channel])
		if t.taken > 0 && t.from <= max(pos, t.join) {
			pos = max(pos, t.taken)
		}
		// But copies do not always arrive in CHAT order: none is covered while it waits to
		// be taken or was handed back, and nothing past the row while copies an earlier
		// session did not settle are still to come back (owe).
		if low := p.waitingBelow(t.channel); low > 0 && pos >= low {
			pos = low - 1
		}
		if owing {
			pos = t.row
		}
		out = append(out, report{t: t, pos: max(pos, t.reported)})
	}
	p.mu.Unlock()
	e.ackAll(acks)
	for i, r := range out {
		ask, err := e.deliveryAsk(protocol.OpConfirmPosition, protocol.ConfirmPositionArgs{Channel: r.t.channel,
			Generation: r.t.gen, LifecycleUID: uid, Position: r.pos, Closing: closing})
		if err != nil {
			e.log.Debug("confirm position", "channel", r.t.channel, "err", err)
			continue
		}
		out[i].ask = ask
	}
	return func(ctx context.Context) {
		for _, r := range out {
			if r.ask == nil {
				continue
			}
			_, err := r.ask.answer(ctx)
			if err != nil {
				if strings.Contains(err.Error(), "not supported") {
					p.mu.Lock()
					p.refused = true
					p.mu.Unlock()
				} else {
					e.log.Debug("confirm position", "channel", r.t.channel, "err", err)
				}
				continue
			}
			p.mu.Lock()
			r.t.reported = max(r.t.reported, r.pos)
			p.mu.Unlock()
		}
	}
}

// ackAll acks copies whose posts the application took.
func (e *Endpoint) ackAll(acks []jetstream.Msg) {
	for _, m := range acks {
		if err := m.Ack(); err != nil {
			e.log.Debug("ack held copy", "err", err)
		}
	}
}
