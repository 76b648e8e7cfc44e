package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// maxGroup bounds the posts one fan-out round decides and copies together.
const maxGroup = 512

// maxInFlight bounds the copies written and not yet acknowledged by the broker.
const maxInFlight = 1024

// fanout is the backstop: it reads every post of CHAT_<space> through the durable
// "fanout" (explicit acks, as the reference's), in order, and copies each post to the
// hand-off subject of every member that may read it (the members bucket for durable
// channels, @mentions on live channels, the ACL bucket for every copy), then acks each
// post. A post is acked only once every copy of it is stored, so a crash or a failed write
// redelivers it; the copies' Nats-Msg-Id makes the second write a no-op within DLV's
// two-hour dedupe window. A restarted daemon resumes at the durable's ack floor.
type fanout struct {
	space    string
	js       jetstream.JetStream
	ackWait  time.Duration
	classes  *view[channelRow, classes]
	roster   *view[memberRow, roster]
	acls     *view[*ACL, acls]
	gate     *gate
	log      *slog.Logger
	syncWait time.Duration

	catchups chan memberRow // new memberships whose activation window needs copying

	// owed are the new memberships whose catch-up has not run, noted before their rows are
	// written: a round that sees such a row runs its catch-up first, so the member's copies
	// keep CHAT order (guarded by mu).
	owed map[owedKey]memberRow

	// readers are the members reading live; their copies of a round wait up to grace
	// for their confirmed positions (see round).
	readers *readers
	grace   time.Duration

	// chatKnown is the daemon's mark of a CHAT sequence known stored (run.chatKnown).
	// Each post delivered raises it to the post's sequence plus the posts the broker said
	// were pending after it: those were all stored before the broker sent it.
	chatKnown *atomic.Uint64
	// freshTo is the mark chatKnown held when the views last began a sync that succeeded
	// (the session goroutine's). A post at or below it was stored before that sync began,
	// so the views are as fresh for it as a sync at its round would make them (see round).
	freshTo uint64

	mu sync.Mutex
	// progress is the last CHAT sequence at or below which every post delivered to the
	// fan-out has had its copies stored (the durable's ack floor at the session's start,
	// then each round's last post).
	progress uint64
}

// post is one CHAT message as the fan-out reads it.
type post struct {
	subject  string
	data     []byte
	seq      uint64
	channel  string
	sender   protocol.Principal
	id       string
	mentions []string
}

// target is one copy to make.
type target struct {
	m      member
	gen    uint64
	reason string
}

// parsePost reads what routing needs from a CHAT message. A message that no receiver
// would accept (bad subject, sender mismatch) is not copied.
func parsePost(subject string, data []byte, seq uint64) (post, bool) {
	sub, err := protocol.ParseSubject(subject)
	if err != nil || sub.Kind != protocol.KindChat || sub.Sender.Validate() != nil {
		return post{}, false
	}
	var head struct {
		ID   *string `json:"id"`
		From *struct {
			ID string `json:"id"`
		} `json:"from"`
		Mentions []string `json:"mentions"`
	}
	if json.Unmarshal(data, &head) != nil || head.ID == nil || head.From == nil || head.From.ID != sub.Sender.String() {
		return post{}, false
	}
	return post{subject: subject, data: data, seq: seq, channel: sub.Channel, sender: sub.Sender,
		id: *head.ID, mentions: protocol.NormalizeMentions(head.Mentions)}, true
}

// plan lists the copies of p: on a durable channel one per member whose row covers it,
// on a live channel one per @mentioned member; each only if the member's ACL lets it read
// p now, never to its own sender, at most one per member. A mentioned agent that is not a
// member of a durable channel gets a copy too (HandoffMention); a mentioned agent whose
// ACL does not let it read the channel, on any channel, gets a mention notice instead
// (HandoffMentionNotice: who, where and the id, never the text). With only set it plans
// for that member alone.
func plan(p post, cl classes, ro roster, ac acls, only *member, now time.Time) []target {
	var out []target
	add := func(m member, reason string) {
		if m.p == p.sender || (only != nil && m != *only) {
			return
		}
		for _, t := range out {
			if t.m == m {
				return
			}
		}
		a := ac.byMember[m.key()]
		if a == nil {
			return
		}
		if !a.Readable(p.channel) {
			if !protocol.IsMentionHandoff(reason) {
				return
			}
			reason = protocol.HandoffMentionNotice
		}
		out = append(out, target{m: m, gen: generation(ro, m, p), reason: reason})
	}
	durable := cl.class(p.channel) == provision.ClassDurable
	if durable {
		ro.rows(p.channel, func(r memberRow) {
			if r.Covers(p.seq) && !given(ro, r.m, p) {
				add(r.m, protocol.HandoffDurableChannel)
			}
		})
	}
	for _, name := range p.mentions {
		for _, m := range ac.byName[name] {
			switch {
			case !durable:
				add(m, protocol.HandoffLiveMention)
			case !isMember(ro, m, p): // a member was given p, or has its copy above
				add(m, protocol.HandoffMention)
			}
		}
	}
	return out
}

// isMember reports whether m has a row of p's channel that covers p.
func isMember(ro roster, m member, p post) bool {
	for _, r := range ro.byMember[m.key()] {
		if protocol.ChannelMatches(r.Channel, p.channel) && r.Covers(p.seq) {
			return true
		}
	}
	return false
}

// given reports whether m confirmed it was given p already (a row of m matching p's
// channel holds a position at or past it): m read it live, so no copy is made.
func given(ro roster, m member, p post) bool {
	for _, r := range ro.byMember[m.key()] {
		if r.Position >= p.seq && protocol.ChannelMatches(r.Channel, p.channel) {
			return true
		}
	}
	return false
}

// generation is the dedupe generation of m's copy of p: the lowest generation among m's
// rows covering p, or 0 (a mention outside any membership). It depends only on the rows,
// so a redelivered post gets the same key.
func generation(ro roster, m member, p post) uint64 {
	var gen uint64
	found := false
	for _, r := range ro.byMember[m.key()] {
		if protocol.ChannelMatches(r.Channel, p.channel) && r.Covers(p.seq) && (!found || r.Generation < gen) {
			gen, found = r.Generation, true
		}
	}
	return gen
}

// copyMsg builds the hand-off frame of p for t: header Cotal-Delivery-Frame "1" and the
// body {"version":1,"channel":...,"msg":...}, msg being the post or, for a mention
// notice, its notice envelope (the reference's frame; Go adds the post's
// CHAT sequence and the reason as headers, which the reference ignores). Its Nats-Msg-Id
// is "<msgId>:<owner>.<actor>:<uid>:<generation>"; a post without an id gets none.
func copyMsg(space string, p post, t target) (*nats.Msg, error) {
	data := p.data
	if t.reason == protocol.HandoffMentionNotice {
		n, err := protocol.EncodeMentionNotice(p.data, p.channel)
		if err != nil {
			return nil, err
		}
		data = n
	}
	body, err := protocol.EncodeDeliveryFrame(p.channel, data)
	if err != nil {
		return nil, err
	}
	h := nats.Header{}
	h.Set(protocol.HeaderDeliveryFrame, protocol.FrameVersion)
	h.Set(protocol.HeaderSeq, strconv.FormatUint(p.seq, 10))
	h.Set(protocol.HeaderReason, t.reason)
	if p.id != "" {
		h.Set(jetstream.MsgIDHeader, protocol.DLVMsgID(p.id, t.m.p, t.m.uid, t.gen))
	}
	return &nats.Msg{Subject: protocol.DLVSubject(space, t.m.p, t.m.uid), Header: h, Data: body}, nil
}

// run serves while the gate is open, until ctx ends.
func (f *fanout) run(ctx context.Context) error {
	for {
		if err := f.gate.wait(ctx); err != nil {
			return nil
		}
		err := f.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			f.log.Warn("fan-out restarts", "err", err)
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}

// FanoutConfig is the fan-out durable as the reference creates it (streams.ts
// fanoutDurableConfig): every post of CHAT, explicit acks, delivery from the first post
// after its creation. ackWait is its redelivery wait.
func FanoutConfig(space string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerFanout,
		FilterSubject: protocol.ChatAll(space),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
}

// ensure binds the fan-out durable, creating it as the reference does when absent. An
// existing durable with explicit acks (made by this or a reference daemon) is used as it
// is. One with another ack policy is the earlier release's (acks-all, so its ack floor
// meant "every post up to here has all its copies"): it is recreated with explicit acks
// starting right after that ack floor, so it keeps its position and no post is skipped.
func (f *fanout) ensure(ctx context.Context) (jetstream.Consumer, error) {
	chat := protocol.StreamChat(f.space)
	cons, err := f.js.Consumer(ctx, chat, protocol.ConsumerFanout)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons, err = f.js.CreateConsumer(ctx, chat, FanoutConfig(f.space, f.ackWait))
		if errors.Is(err, jetstream.ErrConsumerExists) { // made by someone else meanwhile
			return f.ensure(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("create fan-out durable %s on %s: %w", protocol.ConsumerFanout, chat, err)
		}
		return cons, nil
	case err != nil:
		return nil, fmt.Errorf("fan-out durable: %w", err)
	}
	info := cons.CachedInfo()
	if info.Config.AckPolicy == jetstream.AckExplicitPolicy {
		return cons, nil
	}
	start := info.AckFloor.Stream + 1
	if err := f.js.DeleteConsumer(ctx, chat, protocol.ConsumerFanout); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("migrate fan-out durable: %w", err)
	}
	cfg := FanoutConfig(f.space, f.ackWait)
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	cons, err = f.js.CreateConsumer(ctx, chat, cfg)
	if err != nil {
		return nil, fmt.Errorf("migrate fan-out durable %s on %s to explicit acks from post %d: %w", protocol.ConsumerFanout, chat, start, err)
	}
	f.log.Info("fan-out durable migrated to explicit acks", "ackPolicy", info.Config.AckPolicy.String(), "from", start)
	return cons, nil
}

// rewind makes the fan-out durable deliver again, in CHAT order, every post after its ack
// floor (the server's consumer reset), and returns that floor. Whatever an earlier session
// (or a crashed daemon) held unacked thus comes back first, not after an ack-wait expiry
// behind newer posts. A server without consumer reset leaves them to redelivery; nothing is
// lost either way (see round).
func (f *fanout) rewind(ctx context.Context, cons jetstream.Consumer) uint64 {
	chat := protocol.StreamChat(f.space)
	resp, err := f.js.ResetConsumer(ctx, chat, protocol.ConsumerFanout)
	if err == nil && resp.ResetSeq > 0 {
		return resp.ResetSeq - 1
	}
	f.log.Debug("fan-out durable not rewound; unacked posts come back after the ack wait", "err", err)
	if info, ierr := cons.Info(ctx); ierr == nil {
		return info.AckFloor.Stream
	}
	return cons.CachedInfo().AckFloor.Stream
}

// session consumes the fan-out durable until ctx ends, the gate closes or a round fails.
// Posts it holds but has not copied stay unacked; the next session's rewind delivers them
// again, in order.
func (f *fanout) session(ctx context.Context) error {
	cons, err := f.ensure(ctx)
	if err != nil {
		return err
	}
	f.setProgress(f.rewind(ctx, cons))
	in := make(chan jetstream.Msg, maxGroup)
	stop := make(chan struct{})
	f.freshTo = 0
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			raise(f.chatKnown, md.Sequence.Stream+md.NumPending)
		}
		select {
		case in <- m:
		case <-stop:
		}
	}, jetstream.PullMaxMessages(maxGroup), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		f.log.Debug("fan-out consume", "err", err)
	}))
	if err != nil {
		return fmt.Errorf("consume the fan-out durable: %w", err)
	}
	var group []jetstream.Msg
	defer func() {
		close(stop)
		cc.Stop()
	}()
	closed := f.gate.closed()
	for {
		group = group[:0]
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			return nil
		case r := <-f.catchups:
			if !f.take(r) {
				continue // a round ran it already
			}
			if err := f.catchUp(ctx, r); err != nil {
				f.owe(r)
				f.requeue(r)
				return fmt.Errorf("catch-up of %s on %s: %w", r.m.key(), r.Channel, err)
			}
		case m := <-in:
			group = append(group, m)
		more:
			for len(group) < maxGroup {
				select {
				case m := <-in:
					group = append(group, m)
				default:
					break more
				}
			}
			if err := f.round(ctx, group); err != nil {
				return err
			}
		}
	}
}

// round decides and copies one group of posts in order and then acks each of them: a post
// is acked only once every copy of it is stored or skipped as given. A post delivered
// again (its ack was lost, or the server redelivered it) is copied again; the copies'
// Nats-Msg-Id makes the second write a no-op within DLV's dedupe window. Copying every
// delivery, never skipping one as done, keeps progress safe for catch-up even when
// redeliveries come out of order.
//
// A durable channel's copy for a member reading that channel live (readers) is deferred:
// once the round's other copies are written, the round waits, up to the grace, until the
// member's confirmed position covers each deferred post or it stops reading, and then
// writes only the copies not covered, in CHAT order. The decision is taken once per
// member and channel in a round, so each member's copies of a channel keep CHAT order;
// a skip is backed by the position written in the member's row before the post is acked.
//
// The views are made fresh first (every bucket write stored when the sync began is
// applied), unless every post of the group was known stored before the last sync began:
// the views then already hold every write stored before each post was, as a sync now
// would. A burst is thus synced for once, at its first round.
func (f *fanout) round(ctx context.Context, group []jetstream.Msg) error {
	if top := groupTop(group); top == 0 || top > f.freshTo {
		mark := f.chatKnown.Load()
		if err := f.fresh(ctx); err != nil {
			return err
		}
		f.freshTo = mark
	}
	ro := f.roster.snapshot()
	// A new membership's catch-up copies posts before this round's: it goes first.
	if err := f.catchUpSeen(ctx, ro); err != nil {
		return err
	}
	cl, ac := f.classes.snapshot(), f.acls.snapshot()
	now := time.Now()
	var futs inflight
	last := uint64(0)
	type key struct {
		m  member
		ch string
	}
	defers := map[key]bool{} // the member reads the channel live: its copies wait
	var later []owed
	for _, m := range group {
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("post metadata: %w", err)
		}
		last = md.Sequence.Stream
		p, ok := parsePost(m.Subject(), m.Data(), last)
		if !ok {
			continue
		}
		for _, t := range plan(p, cl, ro, ac, nil, now) {
			if t.reason == protocol.HandoffDurableChannel && f.readers != nil {
				k := key{t.m, p.channel}
				d, ok := defers[k]
				if !ok {
					d = f.readers.reading(ro, t.m, p.channel)
					defers[k] = d
				}
				if d {
					later = append(later, owed{p, t})
					continue
				}
			}
			if err := f.copyOne(ctx, &futs, p, t); err != nil {
				return err
			}
		}
	}
	if len(later) > 0 {
		f.waitGiven(ctx, ro, later)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		skipped := 0
		for _, o := range later {
			if f.readers.given(ro, o.t.m, o.p.channel, o.p.seq) {
				skipped++
				continue
			}
			if err := f.copyOne(ctx, &futs, o.p, o.t); err != nil {
				return err
			}
		}
		f.log.Debug("fan-out round: deferred copies", "deferred", len(later), "skipped", skipped)
	}
	if err := f.await(ctx, &futs); err != nil {
		return err
	}
	for _, m := range group {
		if err := m.Ack(); err != nil {
			return fmt.Errorf("ack post: %w", err)
		}
	}
	f.mu.Lock()
	f.progress = max(f.progress, last)
	f.mu.Unlock()
	return nil
}

// owed is one copy of a round deferred for a member reading live.
type owed struct {
	p post
	t target
}

// copyOne writes the copy of p for t.
func (f *fanout) copyOne(ctx context.Context, futs *inflight, p post, t target) error {
	cm, err := copyMsg(f.space, p, t)
	if err != nil {
		return nil // parsePost read it as an object; nothing to copy otherwise
	}
	if err := f.write(ctx, futs, cm); err != nil {
		return fmt.Errorf("copy post %d to %s: %w", p.seq, t.m.key(), err)
	}
	return nil
}

// waitGiven waits until every deferred copy is covered by its member's confirmed
// position or its member stopped reading live, the grace passed, or ctx ended.
func (f *fanout) waitGiven(ctx context.Context, ro roster, later []owed) {
	grace := time.NewTimer(f.grace)
	defer grace.Stop()
	for {
		wake := f.readers.changes() // taken before the check: no change is missed
		open := false
		for _, o := range later {
			if !f.readers.given(ro, o.t.m, o.p.channel, o.p.seq) && f.readers.reading(ro, o.t.m, o.p.channel) {
				open = true
				break
			}
		}
		if !open {
			return
		}
		select {
		case <-wake:
		case <-grace.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// inflight is the copies of one round written and not yet known stored.
type inflight struct {
	futs []jetstream.PubAckFuture
	n    int // copies written in the round
}

// write publishes one copy, first waiting for the ones in flight when there are
// maxInFlight of them (which keeps the publisher from stalling).
func (f *fanout) write(ctx context.Context, in *inflight, m *nats.Msg) error {
	if len(in.futs) >= maxInFlight {
		if err := f.await(ctx, in); err != nil {
			return err
		}
	}
	fut, err := f.js.PublishMsgAsync(m)
	if err != nil {
		return err
	}
	in.futs = append(in.futs, fut)
	in.n++
	return nil
}

// await waits for the store ack of every copy in flight (each future answers once).
func (f *fanout) await(ctx context.Context, in *inflight) error {
	futs := in.futs
	in.futs = in.futs[:0]
	for _, fut := range futs {
		select {
		case <-fut.Ok():
		case err := <-fut.Err():
			return fmt.Errorf("store copy on %s: %w", fut.Msg().Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// groupTop is the highest CHAT sequence of group, 0 if a post's metadata is unreadable.
func groupTop(group []jetstream.Msg) uint64 {
	top := uint64(0)
	for _, m := range group {
		md, err := m.Metadata()
		if err != nil {
			return 0
		}
		top = max(top, md.Sequence.Stream)
	}
	return top
}

// fresh brings the three views up to their buckets' current state.
func (f *fanout) fresh(ctx context.Context) error {
	errs := make(chan error, 3)
	go func() { errs <- f.classes.sync(ctx, f.syncWait) }()
	go func() { errs <- f.roster.sync(ctx, f.syncWait) }()
	go func() { errs <- f.acls.sync(ctx, f.syncWait) }()
	var all []error
	for range 3 {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (f *fanout) setProgress(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progress = max(f.progress, seq)
}
