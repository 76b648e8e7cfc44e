package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// check runs the protocol receive checks and logs a rejection.
func (e *Endpoint) check(subject string, data []byte) (protocol.Received, bool) {
	r, err := protocol.Receive(subject, data)
	if err != nil {
		var rej *protocol.RejectError
		reason := "invalid"
		if errors.As(err, &rej) {
			reason = string(rej.Reason)
		}
		e.log.Warn("message dropped", "reason", reason, "subject", subject, "err", err)
		return r, false
	}
	return r, true
}

// surfaceFirst hands in to Messages() unless a copy with its id was surfaced before
// (dup). The claim and the hand-off happen under one lock, so two sources carrying the
// same posts in the same order (live and hand-off copies of a channel) never surface
// them out of order. surfaced is false when the endpoint closed first.
func (e *Endpoint) surfaceFirst(in *Incoming) (surfaced, dup bool) {
	e.order.Lock()
	defer e.order.Unlock()
	if !e.seen.first(in.Message.ID) {
		return false, true
	}
	return e.surface(in), false
}

// surface hands in to Messages(), blocking until there is room or the endpoint closes.
func (e *Endpoint) surface(in *Incoming) bool {
	if e.ctx.Err() != nil {
		return false
	}
	unsurfaced := e.openUntilAck(in) // under TakeOnAck; before the reader can have it
	if in.kept != nil {
		in.kept.add(in) // before the reader can have it, and settle it
	}
	select { // room in the inbox: a plain send, without the two-way select below
	case e.inbox <- in:
		e.noteSurfaced() // position.go: what the application took is counted from it
		return true
	default:
	}
	select {
	case e.inbox <- in:
		e.noteSurfaced()
		return true
	case <-e.ctx.Done():
		unsurfaced()
		if in.kept != nil {
			in.kept.drop(in)
		}
		return false
	}
}

// onLive handles a core-NATS copy from a channel subscription.
func (e *Endpoint) onLive(m *nats.Msg) {
	defer e.liveHandled(m.Sub) // counted whatever the outcome (position.go)
	r, ok := e.check(m.Subject, m.Data)
	if !ok || (r.Subject.Sender == e.me && !e.tap.Load()) {
		return
	}
	// History of the channel comes first: it holds the posts before this one.
	if !e.waitHistory(r.Subject.Channel) {
		e.liveCut(m.Sub) // closing: this post is not shown, so no live position covers it
		return
	}
	if surfaced, dup := e.surfaceFirst(&Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject}); !surfaced && !dup {
		e.liveCut(m.Sub)
	}
}

// onDMOrAnycast handles a JetStream copy from the DM durable. The durable copy owns the
// ack: a duplicate is acked at once, an anomaly is terminated, anything else is acked by
// whoever reads it from Messages(). A redelivery of a copy this endpoint surfaced and
// the application has not settled is not a duplicate: the application's Ack settles it.
func (e *Endpoint) onDMOrAnycast(m jetstream.Msg) {
	r, ok := e.check(m.Subject(), m.Data())
	if !ok {
		if err := m.Term(); err != nil {
			e.log.Warn("term", "subject", m.Subject(), "err", err)
		}
		return
	}
	in := &Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Durable: true, msg: m}
	in.again, in.againID = e.seen, r.Message.ID
	in.Seq, in.Delivered = copyNumbers(m)
	in.kept = &e.kept
	// Closing leaves it unacked, so it is redelivered to the next incarnation.
	if _, dup := e.surfaceFirst(in); dup {
		if e.kept.outstanding(in.ID, in.Seq) {
			e.log.Debug("redelivered copy still unsettled here: left to the application's ack", "id", in.ID, "seq", in.Seq)
			return
		}
		if err := m.Ack(); err != nil {
			e.log.Warn("ack duplicate", "id", r.Message.ID, "err", err)
		}
	}
}

// copyNumbers returns the stream sequence of a JetStream copy and how many times it was
// delivered, read from its ack subject in place; a subject of another shape is left to
// the JetStream client's own reading (0, 0 when that fails too).
func copyNumbers(m jetstream.Msg) (seq, delivered uint64) {
	if seq, delivered, ok := ackNumbers(m.Reply()); ok {
		return seq, delivered
	}
	if md, err := m.Metadata(); err == nil {
		return md.Sequence.Stream, md.NumDelivered
	}
	return 0, 0
}

// ackNumbers reads the stream sequence and the delivery count from a JetStream ack
// subject without splitting it:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<more>...]
//
// (9 tokens, or 11 and more); ok is false for anything else.
func ackNumbers(reply string) (seq, delivered uint64, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return 0, 0, false
	}
	rest := reply[len(prefix):]
	skip := 2 // stream, consumer
	switch n := strings.Count(reply, ".") + 1; {
	case n == 9:
	case n >= 11:
		skip = 4 // domain, account hash, stream, consumer
	default:
		return 0, 0, false
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	d, rest, _ := strings.Cut(rest, ".")
	sq, _, _ := strings.Cut(rest, ".")
	delivered, err1 := strconv.ParseUint(d, 10, 64)
	seq, err2 := strconv.ParseUint(sq, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return seq, delivered, true
}

// consumeWith feeds the bound durable cons to handle until Close, and returns its consume
// context.
func (e *Endpoint) consumeWith(cons jetstream.Consumer, name, stream string, handle jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	opts = append(opts, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) || e.ctx.Err() == nil {
			e.log.Debug("consume", "durable", name, "err", err)
		}
	}))
	e.keepFor(cons.CachedInfo().Config.AckWait)
	cc, err := cons.Consume(handle, opts...)
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", name, stream, err)
	}
	if e.wrapConsume != nil {
		cc = e.wrapConsume(cc)
	}
	e.mu.Lock()
	e.consumers = append(e.consumers, cc)
	e.mu.Unlock()
	return cc, nil
}

// awaitConsumersStopped waits until every consume context in ccs, stopped, has
// unsubscribed (up to DeliveryTimeout, a hang guard).
func (e *Endpoint) awaitConsumersStopped(ccs []jetstream.ConsumeContext) {
	t := time.NewTimer(e.cfg.DeliveryTimeout)
	defer t.Stop()
	for _, cc := range ccs {
		select {
		case <-cc.Closed():
		case <-t.C:
			e.log.Warn("durable consumer not stopped in time; a copy handed back may come back only after its ack wait")
			return
		}
	}
}

// bindDM finds or creates this principal's DM durable and consumes it. With a fixed
// LifecycleUID it binds that durable only (auth mode pre-creates it); otherwise it reuses
// an existing durable of this principal, so DMs stored while it was away are delivered,
// or creates one starting after the stream's current last message.
func (e *Endpoint) bindDM(ctx context.Context) error {
	stream := protocol.StreamDM(e.cfg.Space)
	if e.lifecycleUID() == "" {
		name, err := e.findDMDurable(ctx, e.me)
		if err != nil {
			return err
		}
		if name == "" {
			if err := e.createDMDurable(ctx); err != nil {
				return err
			}
		} else {
			e.setUID(name[len(protocol.ConsumerDMPrefix(e.me)):])
		}
	}
	name := protocol.ConsumerDM(e.me, e.lifecycleUID())
	cons, err := e.js.Consumer(ctx, stream, name)
	if err != nil {
		return fmt.Errorf("bind %s on %s: %w", name, stream, err)
	}
	if e.cfg.SoleSession {
		if err := e.soleSession(ctx, cons); err != nil {
			return err
		}
	}
	cc, err := e.consumeWith(cons, name, stream, e.onDMOrAnycast)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.dmCons, e.dmCC = cons, cc
	e.mu.Unlock()
	return nil
}

func (e *Endpoint) createDMDurable(ctx context.Context) error {
	stream := protocol.StreamDM(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return e.streamErr(stream, err)
	}
	uid := protocol.NewLifecycleUID()
	cfg := jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerDM(e.me, uid),
		FilterSubject: protocol.DMFilter(e.cfg.Space, e.me),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.cfg.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if last := s.CachedInfo().State.LastSeq; last > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = last + 1
	}
	if _, err := e.js.CreateConsumer(ctx, stream, cfg); err != nil {
		return fmt.Errorf("create %s on %s: %w", cfg.Durable, stream, err)
	}
	e.setUID(uid)
	return nil
}

// findDMDurable returns the name of an existing DM durable of p, or "". It lists the
// DM stream's durables by name only ($JS.API.CONSUMER.NAMES, which an agent credential
// may send), never reading the stream's info, which only the provisioner may.
func (e *Endpoint) findDMDurable(ctx context.Context, p protocol.Principal) (string, error) {
	names, err := e.DMDurableNames(ctx)
	if err != nil {
		return "", err
	}
	prefix := protocol.ConsumerDMPrefix(p)
	found := ""
	for _, name := range names {
		if len(name) > len(prefix) && name[:len(prefix)] == prefix && protocol.ValidLifecycleUID(name[len(prefix):]) {
			if found == "" || name < found {
				found = name
			}
		}
	}
	return found, nil
}

// DMDurableNames lists the names of the space's DM durables (dm_<owner>-<actor>-<uid>),
// page by page through $JS.API.CONSUMER.NAMES, which an agent or the manager may send: who
// has (or had) an inbox here, and nothing else of the DM stream.
func (e *Endpoint) DMDurableNames(ctx context.Context) ([]string, error) {
	stream := protocol.StreamDM(e.cfg.Space)
	var all []string
	for {
		names, total, err := e.consumerNames(ctx, stream, len(all))
		if err != nil {
			return nil, err
		}
		all = append(all, names...)
		if len(names) == 0 || len(all) >= total {
			return all, nil
		}
	}
}

// consumerNames reads one page of the durables of stream from offset, and the total.
func (e *Endpoint) consumerNames(ctx context.Context, stream string, offset int) ([]string, int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	req, err := json.Marshal(map[string]int{"offset": offset})
	if err != nil {
		return nil, 0, err
	}
	m, err := e.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.NAMES."+stream, req)
	if err != nil {
		return nil, 0, fmt.Errorf("list durables of %s: %w", stream, e.refused(err))
	}
	var page struct {
		Total     int      `json:"total"`
		Consumers []string `json:"consumers"`
		Error     *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &page); err != nil {
		return nil, 0, fmt.Errorf("list durables of %s: %w", stream, err)
	}
	if page.Error != nil {
		if page.Error.ErrCode == 10059 { // stream not found
			return nil, 0, e.streamErr(stream, jetstream.ErrStreamNotFound)
		}
		return nil, 0, fmt.Errorf("list durables of %s: %s (%d)", stream, page.Error.Description, page.Error.ErrCode)
	}
	return page.Consumers, page.Total, nil
}

// bindRole finds or creates the role-shared anycast durable and takes its asks, at most
// Config.MaxAsks at a time (see takeAsks).
func (e *Endpoint) bindRole(ctx context.Context) error {
	stream := protocol.StreamTask(e.cfg.Space)
	cfg := jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerRole(e.cfg.Role),
		FilterSubject: protocol.RoleFilter(e.cfg.Space, e.cfg.Role),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.cfg.AskAckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	cons, err := e.js.Consumer(ctx, stream, cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = e.js.CreateConsumer(ctx, stream, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = e.js.Consumer(ctx, stream, cfg.Durable)
		}
		if err != nil {
			return fmt.Errorf("create %s on %s: %w", cfg.Durable, stream, err)
		}
	} else if err != nil {
		return e.streamErr(stream, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("the endpoint is closed")
	}
	e.roleCons = cons
	e.keepForLocked(askAckWait(cons))
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.takeAsks(cons)
	}()
	return nil
}

// askAckWait is the ack wait of the role's durable cons, by which the keeper marks the
// asks held here in progress; protocol.AnycastAckWait when its info does not say.
func askAckWait(cons jetstream.Consumer) time.Duration {
	if w := cons.CachedInfo().Config.AckWait; w > 0 {
		return w
	}
	return protocol.AnycastAckWait
}

// askPoll bounds one pull of the role's durable; askRetry is the pause after a failed one.
const (
	askPoll  = 10 * time.Second
	askRetry = 500 * time.Millisecond
)

// takeAsks pulls the role's asks one at a time, and only while fewer than
// Config.MaxAsks are held (pulled and not yet settled by Ack or Nak), so asks never
// queue up in a holder: those it has not taken stay in the role's queue for any live
// holder, and a holder that dies strands only what it held. It runs until Close.
func (e *Endpoint) takeAsks(cons jetstream.Consumer) {
	slots := make(chan struct{}, e.cfg.MaxAsks)
	for {
		select {
		case slots <- struct{}{}:
		case <-e.ctx.Done():
			return
		}
		release := sync.OnceFunc(func() { <-slots })
		m, err := e.pullAsk(cons)
		if m == nil {
			release()
			if err != nil {
				e.log.Debug("take ask", "role", e.cfg.Role, "err", err)
				select {
				case <-time.After(askRetry):
				case <-e.ctx.Done():
					return
				}
			}
			continue
		}
		e.onAsk(m, release)
	}
}

// pullAsk waits up to askPoll for one ask; nil and no error means none came.
func (e *Endpoint) pullAsk(cons jetstream.Consumer) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(e.ctx, askPoll)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(ctx))
	if err != nil {
		if e.ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	for m := range batch.Messages() {
		return m, nil
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && e.ctx.Err() == nil {
		return nil, err
	}
	return nil, nil
}

// onAsk surfaces one ask the endpoint now holds; the keeper marks it in progress until it
// is settled, and release frees its slot once it is. A redelivery of an ask the
// application still holds unsettled (its ack wait ran out before the keeper's mark
// came) is neither surfaced nor acked: the application's Ack settles the ask.
func (e *Endpoint) onAsk(m jetstream.Msg, release func()) {
	r, ok := e.check(m.Subject(), m.Data())
	if !ok {
		if err := m.Term(); err != nil {
			e.log.Warn("term", "subject", m.Subject(), "err", err)
		}
		release()
		return
	}
	in := &Incoming{Message: r.Message, Kind: r.Kind, Subject: r.Subject, Durable: true, msg: m,
		settle: release, kept: &e.kept}
	in.again, in.againID = e.seen, r.Message.ID
	in.Seq, in.Delivered = copyNumbers(m)
	surfaced, dup := e.surfaceFirst(in)
	switch {
	case dup && e.kept.outstanding(in.ID, in.Seq):
		release() // the held copy keeps its own slot
		e.log.Debug("redelivered copy still unsettled here: left to the application's ack", "id", in.ID, "seq", in.Seq)
	case dup:
		if err := in.Ack(); err != nil {
			e.log.Warn("ack duplicate", "id", r.Message.ID, "err", err)
		}
	case !surfaced: // closing: hand it to another holder now, not after the ack wait
		if err := in.Nak(); err != nil {
			e.log.Debug("nak ask", "id", r.Message.ID, "err", err)
		}
	}
}

func (e *Endpoint) streamErr(stream string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: space %q has no stream %s on %s for this credential: the space is not served to it; `cotal up --space %s` adds a space",
			ErrNotProvisioned, e.cfg.Space, stream, e.nc.ConnectedUrlRedacted(), e.cfg.Space)
	}
	return fmt.Errorf("stream %s: %w", stream, e.refused(err))
}

// refused explains a request that timed out because the broker refused its subject: the
// refusal arrives on its own, so a timeout alone would hide the reason.
func (e *Endpoint) refused(err error) error {
	last := e.nc.LastError()
	if errors.Is(err, context.DeadlineExceeded) && last != nil && errors.Is(last, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w: refused by the broker (%v)", ErrRefused, last)
	}
	return err
}
