package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// The durable backstop of durable channels: on JoinChannel of a channel whose delivery
// class is durable the endpoint also asks the delivery daemon for a durable join, and
// consumes its hand-off durable dlv_<owner>-<actor>-<uid>, where the daemon copies every
// post of the channel from the join on, for as long as it stays joined, whether or not the
// endpoint is connected. Copies arrive Durable, deduplicated against what was seen live;
// Ack commits each.

// ErrNoDeliveryDaemon reports that no delivery daemon answered for the space.
var ErrNoDeliveryDaemon = errors.New("no delivery daemon answers for the space")

// Unestablished is how a durable channel joined without its backstop is reported.
const Unestablished = "joined live, durable backstop unestablished"

// Backstop reports whether the durable backstop of a joined channel is established, and
// when it is not, why: a live channel ("live channel"), or a durable one whose durable
// join failed (Unestablished and the cause). ok is false for a channel not joined.
func (e *Endpoint) Backstop(channel string) (established bool, why string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.channels[channel] == nil {
		return false, "", false
	}
	why, ok = e.backstop[channel]
	if !ok {
		return false, "not a durable channel", true
	}
	return why == "", why, true
}

// joinDurableChannel asks the daemon for the durable join of channel from cursor (the CHAT
// sequence captured before the live subscribe) and binds the hand-off durable. It returns
// the membership's join cursor, after which every post arrives as a hand-off copy, and
// whether the backstop is established. A failure is not the live join's: it is recorded
// and logged as "joined live, durable backstop unestablished".
func (e *Endpoint) joinDurableChannel(ctx context.Context, channel string, cursor uint64, cfg ChannelConfig) (joinCursor uint64, ok bool) {
	if cfg.DeliveryClass == "live" {
		return 0, false
	}
	why := ""
	res, err := e.requestJoin(ctx, channel, cursor)
	joinCursor = cursor
	if res.JoinCursor != nil {
		joinCursor = *res.JoinCursor
	}
	if err == nil {
		uid := e.lifecycleUID()
		if uid == "" {
			err = errors.New("this endpoint has no lifecycle uid, so it has no hand-off durable")
		} else {
			err = e.bindHandoff(ctx, protocol.StreamDLV(e.cfg.Space), protocol.ConsumerDLV(e.me, uid))
		}
	}
	if err != nil {
		why = Unestablished + ": " + err.Error()
		e.log.Warn(Unestablished, "channel", channel, "err", err)
	}
	e.mu.Lock()
	if e.channels[channel] != nil {
		e.backstop[channel] = why
	}
	e.mu.Unlock()
	if why == "" {
		// Posts after cursor reach the live subscription (it was live before cursor was read).
		e.track(channel, cursor, joinCursor, res.Generation, res.Position)
	}
	return joinCursor, why == ""
}

// requestJoin sends durableJoin for channel, with cursor (a Go extension a reference
// daemon ignores), and returns the daemon's answer. Its join cursor, before which the
// history replay stops, is cursor when the daemon (a reference one) does not say.
func (e *Endpoint) requestJoin(ctx context.Context, channel string, cursor uint64) (protocol.DurableJoinResult, error) {
	var res protocol.DurableJoinResult
	rep, err := e.deliveryRequest(ctx, protocol.OpDurableJoin, protocol.DurableJoinArgs{Channel: channel, Cursor: &cursor})
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(rep.Data, &res); err != nil {
		return res, fmt.Errorf("durable join: answer: %w", err)
	}
	if !res.Durable {
		return res, fmt.Errorf("durable join: the daemon did not make it durable: %s", res.Reason)
	}
	return res, nil
}

// leaveDurableChannel tombstones the membership of channel at the CHAT stream's last sequence.
// Copies of later posts that were already on their way are dropped by this endpoint.
func (e *Endpoint) leaveDurableChannel(channel string) error {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.DeliveryTimeout)
	defer cancel()
	stream := protocol.StreamChat(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return e.streamErr(stream, err)
	}
	cursor := s.CachedInfo().State.LastSeq
	e.mu.Lock()
	e.left[channel] = cursor
	e.mu.Unlock()
	e.untrack(channel)
	uid := e.lifecycleUID()
	if uid == "" {
		return nil // no incarnation, no membership
	}
	list, err := e.Memberships(ctx)
	if err != nil {
		return err
	}
	for _, m := range list {
		if m.Channel != channel {
			continue
		}
		gen := m.Generation
		_, err = e.deliveryRequest(ctx, protocol.OpDurableLeave, protocol.DurableLeaveArgs{Channel: channel, Generation: &gen,
			LifecycleUID: uid, Cursor: &cursor})
		return err
	}
	return nil
}

// Memberships lists this incarnation's active durable memberships as the delivery daemon
// keeps them.
func (e *Endpoint) Memberships(ctx context.Context) ([]protocol.MembershipInfo, error) {
	uid := e.lifecycleUID()
	if uid == "" {
		return nil, errors.New("list memberships: this endpoint has no lifecycle uid")
	}
	rep, err := e.deliveryRequest(ctx, protocol.OpListMemberships, protocol.ListMembershipsArgs{LifecycleUID: uid})
	if err != nil {
		return nil, err
	}
	var out protocol.ListMembershipsResult
	if err := json.Unmarshal(rep.Data, &out); err != nil {
		return nil, fmt.Errorf("list memberships: %w", err)
	}
	return out.Memberships, nil
}

// ReadHistory reads channel's newest posts through the delivery daemon (the reference's
// readHistory): at most limit of them (0 asks for the daemon's default, 100; more than
// 200 is read as 200), oldest first; complete reports that nothing older is retained on
// the stream. The daemon checks this principal's read ACL row at every call, so a
// channel outside it is refused, never answered with an empty page.
func (e *Endpoint) ReadHistory(ctx context.Context, channel string, limit int) (msgs []protocol.Message, complete bool, err error) {
	if limit < 0 {
		return nil, false, fmt.Errorf("read history: limit %d: want 0 (the default) or more", limit)
	}
	args := protocol.ReadHistoryArgs{Channel: channel}
	if limit > 0 {
		args.Limit = &limit
	}
	rep, err := e.deliveryRequest(ctx, protocol.OpReadHistory, args)
	if err != nil {
		return nil, false, err
	}
	var page struct {
		Items    *[]json.RawMessage `json:"items"`
		Complete *bool              `json:"complete"`
	}
	if err := json.Unmarshal(rep.Data, &page); err != nil || page.Items == nil || page.Complete == nil {
		return nil, false, errors.New("read history: the delivery daemon returned a malformed page (expected {items, complete})")
	}
	msgs = make([]protocol.Message, 0, len(*page.Items))
	for i, raw := range *page.Items {
		m, err := protocol.DecodeMessage(raw)
		if err != nil {
			return nil, false, fmt.Errorf("read history: item %d: %w", i, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, *page.Complete, nil
}

// deliveryRequest sends op on this principal's delivery rail, in the reference's envelope
// {op, args, from}, and waits for the answer under the request subject. The daemon takes
// the caller from the subject; the request also carries the connection's credential and
// its key's signature (or a callout member's uid) when it has one, a Go extension that
// lets a Go daemon record the read ACL of a credential minted before it wrote ACL rows.
func (e *Endpoint) deliveryRequest(ctx context.Context, op string, args any) (protocol.ControlReply, error) {
	p, err := e.deliveryAsk(op, args)
	if err != nil {
		return protocol.ControlReply{}, err
	}
	return p.answer(ctx)
}

// deliveryAsk sends op as deliveryRequest does and returns at once: the answer is read
// from the pending request, so Close sends its requests before it stops its consumers and
// reads the answers after.
func (e *Endpoint) deliveryAsk(op string, args any) (*pendingAsk, error) {
	subject := protocol.CtlSubject(e.cfg.Space, protocol.ServiceDelivery, e.me)
	a, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	body, err := json.Marshal(protocol.ControlRequest{Op: op, Args: a,
		From: protocol.EndpointRef{ID: e.me.String(), Name: e.cfg.Name, Role: e.cfg.Role}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	if err := e.sign(msg); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	sub, err := e.send(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &pendingAsk{e: e, op: op, sub: sub, sent: time.Now()}, nil
}

// pendingAsk is a request sent to the delivery daemon whose answer is not read yet.
type pendingAsk struct {
	e    *Endpoint
	op   string
	sub  *nats.Subscription
	sent time.Time
}

// answer waits for the daemon's answer, up to DeliveryTimeout from the send, and decodes
// it: an error when the daemon refused or did not answer.
func (p *pendingAsk) answer(ctx context.Context) (protocol.ControlReply, error) {
	ctx, cancel := context.WithDeadline(ctx, p.sent.Add(p.e.cfg.DeliveryTimeout))
	defer cancel()
	m, err := p.e.await(ctx, p.sub)
	if err != nil {
		return protocol.ControlReply{}, fmt.Errorf("%s: %w", p.op, err)
	}
	var rep protocol.ControlReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return rep, fmt.Errorf("%s: answer: %w", p.op, err)
	}
	if !rep.OK {
		return rep, fmt.Errorf("%s refused by the delivery daemon: %s", p.op, rep.Error)
	}
	return rep, nil
}

// sign puts the connection's user JWT and its key's signature over the request in msg's
// headers; a callout-admitted connection names its lifecycle uid instead; a connection
// with neither sends none (the daemon then reads its ACL row by alias).
func (e *Endpoint) sign(msg *nats.Msg) error {
	if e.cfg.Callout {
		if uid := e.lifecycleUID(); uid != "" {
			msg.Header.Set(protocol.HeaderUID, uid)
		}
		return nil
	}
	if e.nc.Opts.UserJWT == nil || e.nc.Opts.SignatureCB == nil {
		return nil
	}
	token, err := e.nc.Opts.UserJWT()
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	sig, err := e.nc.Opts.SignatureCB(protocol.SignedBytes(msg.Subject, msg.Data))
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	msg.Header.Set(protocol.HeaderJWT, token)
	msg.Header.Set(protocol.HeaderSig, base64.RawURLEncoding.EncodeToString(sig))
	return nil
}

// request publishes msg with a reply subject under its own subject and waits for the
// answer (a credential reads only those replies).
func (e *Endpoint) request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.DeliveryTimeout)
	defer cancel()
	sub, err := e.send(msg)
	if err != nil {
		return nil, err
	}
	return e.await(ctx, sub)
}

// send publishes msg with a reply subject under its own subject and returns the
// subscription its answer arrives on, for await.
func (e *Endpoint) send(msg *nats.Msg) (*nats.Subscription, error) {
	msg.Reply = msg.Subject + "." + protocol.ReplyToken + "." + uuid.NewString()
	sub, err := e.nc.SubscribeSync(msg.Reply)
	if err != nil {
		return nil, err
	}
	if err := e.nc.PublishMsg(msg); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// await reads the answer to a request sent by send until ctx ends, and unsubscribes.
func (e *Endpoint) await(ctx context.Context, sub *nats.Subscription) (*nats.Msg, error) {
	defer func() { _ = sub.Unsubscribe() }()
	m, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, ErrNoDeliveryDaemon
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w (no answer within %s)", ErrNoDeliveryDaemon, e.cfg.DeliveryTimeout)
	}
	if err != nil {
		return nil, err
	}
	if m.Header.Get("Status") == "503" {
		return nil, ErrNoDeliveryDaemon
	}
	return m, nil
}

// ProbeDelivery asks whether a delivery daemon serves the space: its answer, or
// responder "unbound" when none answers.
func (e *Endpoint) ProbeDelivery(ctx context.Context) (protocol.PlaneProbe, error) {
	msg := nats.NewMsg(protocol.LiveSubject(e.cfg.Space, protocol.PlaneDelivery, e.me))
	m, err := e.request(ctx, msg)
	if errors.Is(err, ErrNoDeliveryDaemon) {
		return protocol.PlaneProbe{Plane: protocol.PlaneDelivery, Responder: protocol.ResponderUnbound}, nil
	}
	if err != nil {
		return protocol.PlaneProbe{Plane: protocol.PlaneDelivery, Responder: protocol.ResponderUnknown}, fmt.Errorf("probe delivery: %w", err)
	}
	var p protocol.PlaneProbe
	if err := json.Unmarshal(m.Data, &p); err != nil {
		return protocol.PlaneProbe{Plane: protocol.PlaneDelivery, Responder: protocol.ResponderUnknown}, fmt.Errorf("probe delivery: %w", err)
	}
	return p, nil
}

// bindHandoff consumes the hand-off durable once per endpoint.
func (e *Endpoint) bindHandoff(ctx context.Context, stream, name string) error {
	e.mu.Lock()
	bound := e.handoff
	e.mu.Unlock()
	if bound == name {
		return nil
	}
	if bound != "" {
		return fmt.Errorf("the daemon named hand-off durable %s, but this endpoint consumes %s", name, bound)
	}
	cons, err := e.js.Consumer(ctx, stream, name)
	if err != nil {
		return fmt.Errorf("bind %s on %s: %w", name, stream, err)
	}
	e.mu.Lock()
	if e.handoff != "" {
		e.mu.Unlock()
		return nil
	}
	e.handoff = name
	e.mu.Unlock()
	// Copies pending now were delivered to an earlier session (this one consumes nothing
	// yet): no position past the rows is confirmed until they came back (positions.owe).
	if info := cons.CachedInfo(); info != nil {
		e.pos.owe(info.NumAckPending, info.Delivered.Stream)
	}
	cc, err := e.consumeWith(cons, name, stream, e.onHandoff)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.handCC = cc
	e.mu.Unlock()
	return nil
}

// drainHandoff stops the hand-off consumer at Close and waits until every copy the
// broker sent it has passed onHandoff (up to DeliveryTimeout, a hang guard).
func (e *Endpoint) drainHandoff() {
	e.mu.Lock()
	cc := e.handCC
	e.mu.Unlock()
	if cc == nil || !e.nc.IsConnected() {
		return // stopped with the others; copies in flight wait out their ack wait
	}
	closed := cc.Closed()
	cc.Drain()
	t := time.NewTimer(e.cfg.DeliveryTimeout)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		e.log.Warn("hand-off consumer not drained in time; copies still in flight wait out their ack wait")
	}
}

// bindExistingHandoff consumes this incarnation's hand-off durable at Join whenever it
// exists, empty or not. Copies stored while the endpoint was away then arrive before any
// channel is rejoined, and copies the daemon makes later arrive while the endpoint stays
// connected, whoever wrote the membership that makes them: the endpoint's own durable
// join, or another party's row (a workflow conclave's run host), of which the endpoint
// hears nothing. The durable exists from the mint on (provision.Agent). Only when copies
// wait does the endpoint ask the daemon for its memberships (to judge them by the
// positions those confirmed), so a fresh member asks no daemon at connect. No durable, or
// no durable plane at all, is not an error.
func (e *Endpoint) bindExistingHandoff(ctx context.Context) {
	uid := e.lifecycleUID()
	if uid == "" || e.nc.Opts.UserJWT == nil {
		return
	}
	stream, name := protocol.StreamDLV(e.cfg.Space), protocol.ConsumerDLV(e.me, uid)
	c, err := e.js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return // no hand-off durable: a durable join binds the one the daemon then creates
	}
	if err != nil || c.CachedInfo().NumPending > 0 || c.CachedInfo().NumAckPending > 0 {
		// The copies waiting there are judged by the positions the memberships confirmed.
		if list, err := e.Memberships(ctx); err == nil {
			e.seedRows(list)
		} else {
			e.log.Debug("memberships not listed; waiting copies are judged by id only", "err", err)
		}
	}
	err = e.bindHandoff(ctx, stream, name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		e.log.Debug("no hand-off durable bound", "err", err)
	}
}

// onHandoff handles a copy from the hand-off durable: the reference's frame or, for
// copies stored before an upgrade, the earlier Go frame (protocol.DecodeHandoff). The
// daemon alone writes there; the post then passes the same receive checks as a live copy.
// A copy of this endpoint's own post, or of a channel it left (posted after the leave),
// is acked at once; one already seen live is acked once the application took the live
// copy (holdCopy); a frame that does not decode is terminated.
func (e *Endpoint) onHandoff(m jetstream.Msg) {
	var dseq uint64 // the copy's sequence in the hand-off stream
	if md, err := m.Metadata(); err == nil {
		dseq = md.Sequence.Stream
	}
	back := false // handed back: not settled by this session
	defer func() {
		if !back {
			e.pos.repay(dseq)
		}
	}()
	h := m.Headers()
	ho, err := protocol.DecodeHandoff(e.cfg.Space, h.Get, m.Data())
	if err != nil {
		e.log.Warn("hand-off copy dropped", "subject", m.Subject(), "err", err)
	}
	r, ok := protocol.Received{}, false
	if err == nil {
		r, ok = e.check(ho.Subject, ho.Data)
	}
	if !ok || r.Kind != protocol.DeliveryChannel || r.Subject.Space != e.cfg.Space {
		if err := m.Term(); err != nil {
			e.log.Warn("term", "subject", m.Subject(), "err", err)
		}
		return
	}
	seq := ho.Seq
	// A copy missed while away is newer than the channel's history: let that go first
	// (it may hold this post too, which the dedupe below then drops).
	if !e.waitHistory(r.Subject.Channel) {
		back = true
		e.handBack(r.Subject.Channel, seq, m) // closing: redelivered to the next incarnation
		return
	}
	ch := r.Subject.Channel
	if r.Subject.Sender == e.me || e.leftBefore(ch, seq) {
		if err := m.Ack(); err != nil {
			e.log.Warn("ack duplicate", "id", r.Message.ID, "err", err)
		}
		return
	}
	dup := e.pos.givenAt(ch, seq)
	if !dup && e.pos.liveMayCover(ch, seq) {
		// The post may have been read live past what the id window remembers: confirm
		// how far live reading got (it holds every post stored by now) and judge again.
		e.confirmLive(e.ctx)
		dup = e.pos.givenAt(ch, seq)
	}
	if !dup {
		var surfaced bool
		surfaced, dup = e.surfaceFirst(&Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Durable: true, Seq: seq, Reason: ho.Reason, msg: m, kept: &e.kept})
		if surfaced || dup {
			e.pos.surfacedHandoff(ch, seq)
		}
		if !surfaced && !dup {
			back = true
			e.handBack(ch, seq, m) // closing: redelivered to the next incarnation
			return
		}
	}
	if dup && e.kept.outstanding(r.Message.ID, seq) {
		// The application still holds this post's hand-off copy unsettled: acking a
		// redelivery of that copy would call the post handled before anyone read it. The
		// application's Ack settles it; any other copy comes back and is judged then.
		e.log.Debug("redelivered copy still unsettled here: left to the application's ack", "id", r.Message.ID, "seq", seq)
		return
	}
	// A post surfaced live but still unread is acked only once the application takes it
	// (position.go), so a Close before that leaves the copy to the next incarnation.
	if dup && !e.holdCopy(ch, seq, m) {
		if err := m.Ack(); err != nil {
			e.log.Warn("ack duplicate", "id", r.Message.ID, "err", err)
		}
	}
}

// leftBefore reports whether this endpoint left a channel matching ch, in this session,
// before the post at seq, and has not rejoined it.
func (e *Endpoint) leftBefore(ch string, seq uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for pattern, at := range e.left {
		if seq > at && protocol.ChannelMatches(pattern, ch) && e.channels[pattern] == nil {
			return true
		}
	}
	return false
}
