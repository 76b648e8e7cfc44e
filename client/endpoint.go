// Package client is the Go SDK of a Cotal space: an Endpoint connects to NATS, joins a
// space with an AgentCard, keeps its presence, joins and leaves channels, sends
// multicast, unicast and anycast messages, and receives them through one channel with an
// explicit ack once each message has been surfaced.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Config says who an Endpoint is and on which space. Zero durations take the protocol
// defaults.
type Config struct {
	Space        string         // space token; required
	Name         string         // display name; required
	Actor        string         // actor token; "" means Name, which must then be a valid actor
	Owner        string         // owner token; "" means "local"
	Role         string         // anycast role this endpoint serves; "" means none
	Kind         string         // card kind; "" means agent
	Description  string         // one line for the card
	Meta         map[string]any // advisory card metadata
	LifecycleUID string         // incarnation id; "" means reuse this principal's DM durable or mint one
	// SoleSession makes Join refuse (ErrSessionLive) while another connection consumes
	// this principal's direct messages: an AI agent's session, whose DMs a second one would
	// silently split. Without it a second session joins beside the first (cotal join warns).
	SoleSession bool
	// Callout says an auth callout admitted the connection: its user key is the server's,
	// so requests to the delivery daemon name LifecycleUID instead of carrying a signed
	// credential (the daemon holds them to the ACL the callout recorded).
	Callout bool
	// Skills and Tags are what the card advertises beyond its description (an A2A
	// agent's skills, presented by the a2apeer bridge); nil means none.
	Skills []protocol.Skill
	Tags   []string

	Heartbeat time.Duration // presence heartbeat; 0 means protocol.HeartbeatInterval
	AckWait   time.Duration // JetStream ack wait of a DM durable this endpoint creates; 0 means 60 s
	// AskAckWait is the ack wait of the role's anycast durable when this endpoint creates
	// it (open mode; a provisioned one keeps its own); 0 means protocol.AnycastAckWait.
	// While this endpoint holds an ask it extends the wait (InProgress) by itself, so the
	// wait only decides how soon the asks of a holder that died go to another.
	AskAckWait time.Duration
	// MaxAsks is how many asks of its role this endpoint takes at once: pulled and not
	// yet acked, naked or terminated. A holder that dies strands only these until the
	// ack wait ends; the others wait in the role's queue for a live holder. 0 means 1.
	MaxAsks   int
	InboxSize int          // capacity of Messages(); 0 means 256
	Logger    *slog.Logger // nil means discard
	// DeliveryTimeout bounds a request to the delivery daemon (durable join and leave);
	// 0 means 3 s.
	DeliveryTimeout time.Duration
	// PositionEvery paces the confirmations of what the endpoint read live on its durable
	// channels (sent to the delivery daemon, which then skips those copies): once live
	// traffic pauses for an eighth of it, or once per period while traffic flows, never
	// two within a quarter of it; 0 means 100 ms.
	PositionEvery time.Duration
	// ReconnectFor bounds how long Connect's connection keeps trying to reconnect to a
	// lost server before it gives up and Lost closes; 0 means 1 minute.
	ReconnectFor time.Duration
}

// Shown is how far an identity has been shown the history of its channels: per joined
// channel (pattern), the CHAT stream sequence through which every post was shown or
// passed over. Stream is the creation time of the CHAT stream those sequences count in,
// so a cursor of a stream since deleted and made again is ignored.
type Shown struct {
	Stream   time.Time         `json:"stream"`
	Channels map[string]uint64 `json:"channels"`
}

// ConnEvent is a change of an owned connection: lost (Connected false, Err the cause) or
// back (Connected true, URL the server).
type ConnEvent struct {
	Connected bool
	URL       string
	Err       error
}

// Endpoint is one peer on one space. Create it with Connect or New; call Join to appear in
// presence and receive; Close leaves.
type Endpoint struct {
	nc     *nats.Conn
	ownsNC bool
	js     jetstream.JetStream
	cfg    Config
	me     protocol.Principal
	meID   string // me.String(), made once: every envelope carries it
	log    *slog.Logger

	denied   <-chan error    // permission refusals of an owned connection, for publish to match
	lost     <-chan struct{} // closed when an owned connection closes for good
	lostWhy  *lostCause      // why lost closed, for LostErr
	events   <-chan ConnEvent
	inbox    chan *Incoming
	seen     *dedupe
	pos      *positions  // what each durable channel was given, by CHAT sequence
	kept     keeper      // surfaced durable copies not yet settled, kept from redelivery
	order    sync.Mutex  // held from a dedupe claim to its hand-off into Messages()
	replayMu sync.Mutex  // one history reader at a time
	tap      atomic.Bool // surface own posts too (observers)

	mu       sync.Mutex
	joined   bool
	closed   bool
	status   protocol.Status
	activity string
	since    int64 // statusSince
	actSince int64 // activitySince
	// attention and modes are the advisory attention hints published with presence
	// (SetAttention).
	attention protocol.Attention
	modes     map[string]string
	uid       string
	channels  map[string]*nats.Subscription
	presence  jetstream.KeyValue
	present   bool                     // Join wrote this endpoint's presence: Close writes it offline
	roleCons  jetstream.Consumer       // the role's anycast durable, once bound
	dmCons    jetstream.Consumer       // the DM durable, once bound
	dmCC      jetstream.ConsumeContext // its consume context
	backstop  map[string]string        // joined channel -> "" when its durable backstop is established, else why not
	left      map[string]uint64        // channel left in this session -> the CHAT sequence it was left at
	handoff   string                   // the hand-off durable this endpoint consumes, once bound
	handCC    jetstream.ConsumeContext // its consume context, drained first at Close
	gates     map[string]*gate         // channel whose history is replaying -> its gate
	gating    atomic.Int32             // len(gates), stored under mu: 0 lets a copy skip the lock
	shown     Shown                    // history shown per channel, for the next session
	joinedAt  map[string]uint64        // channel joined this session -> its watermark, once replayed
	inboxes   map[string]struct{}      // DM recipients whose inbox was confirmed (bounded)

	ctx    context.Context // the endpoint's lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	consumers []jetstream.ConsumeContext // the durable consume contexts (consumeWith), stopped at Close
	// wrapConsume, set only by tests, wraps every durable consume context (consumeWith).
	wrapConsume func(jetstream.ConsumeContext) jetstream.ConsumeContext
}

// ErrNotProvisioned reports a space whose streams do not exist on the server.
var ErrNotProvisioned = errors.New("space is not provisioned")

// Connect dials url with opts and returns an Endpoint that owns the connection. A lost
// server is reconnected to for cfg.ReconnectFor; ConnEvents reports the loss and the
// return, and Lost closes once it gives up.
func Connect(ctx context.Context, url string, cfg Config, opts ...nats.Option) (*Endpoint, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// Permission refusals arrive asynchronously: report them as denials, not silence.
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	giveUp := cfg.ReconnectFor
	if giveUp <= 0 {
		giveUp = time.Minute
	}
	denied := make(chan error, 16)
	lost := make(chan struct{})
	why := &lostCause{}
	events := make(chan ConnEvent, 16)
	emit := func(ev ConnEvent) {
		select {
		case events <- ev:
		default: // nobody reads the events; Lost still reports the end
		}
	}
	var lostOnce sync.Once
	opts = append([]nats.Option{nats.ClosedHandler(func(*nats.Conn) { lostOnce.Do(func() { close(lost) }) }),
		nats.MaxReconnects(-1), // giving up is timed below, not counted
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closed on purpose, not lost
			}
			why.lose()
			emit(ConnEvent{Err: err, URL: url})
			why.arm(giveUp, func() {
				if !nc.IsConnected() && !nc.IsClosed() {
					why.set(fmt.Errorf("the server at %s did not come back within %s", url, giveUp))
					nc.Close()
				}
			})
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			why.disarm()
			emit(ConnEvent{Connected: true, URL: nc.ConnectedUrlRedacted()})
		}),
		nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Warn("refused by the broker", "err", err)
				select {
				case denied <- err:
				default: // nobody is waiting on a publish; the log line is the report
				}
				return
			}
			// Anything else (a watcher's consumer gone quiet while the server is away)
			// is the connection's trouble, which ConnEvents and Lost report once.
			log.Debug("connection", "connected", nc.IsConnected(), "err", err)
		})}, opts...)
	nc, err := Dial(ctx, url, opts...)
	if err != nil {
		return nil, err
	}
	ep, err := New(nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	ep.ownsNC, ep.denied, ep.lost, ep.lostWhy, ep.events = true, denied, lost, why, events
	return ep, nil
}

// lostCause is why an owned connection was given up, the timer that gives it up, and
// whether it was ever lost (posts in the gap were not seen live).
type lostCause struct {
	mu    sync.Mutex
	err   error
	timer *time.Timer
	gap   bool
}

func (l *lostCause) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *lostCause) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *lostCause) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gap = true
}

// wasLost reports whether the connection was ever lost; nil never was.
func (l *lostCause) wasLost() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gap
}

// arm starts the give-up timer unless it runs already.
func (l *lostCause) arm(d time.Duration, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer == nil {
		l.timer = time.AfterFunc(d, f)
	}
}

func (l *lostCause) disarm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// Lost is closed once the endpoint's own connection is closed for good: by Close, or
// because reconnecting gave up (after Config.ReconnectFor) or was refused (a revoked
// grant). It is nil, never closing, for an endpoint built with New, whose caller owns the
// connection.
func (e *Endpoint) Lost() <-chan struct{} { return e.lost }

// LostErr says why Lost closed: the server did not come back in time, or the
// connection's last error. It is nil while the connection is open.
func (e *Endpoint) LostErr() error {
	if e.lostWhy != nil {
		if err := e.lostWhy.get(); err != nil {
			return err
		}
	}
	if !e.nc.IsClosed() {
		return nil
	}
	if err := e.nc.LastError(); err != nil {
		return err
	}
	return errors.New("the connection was closed")
}

// ConnEvents reports each loss and return of the endpoint's own connection, so a
// command can say once that the mesh is gone and once that it is back. It is nil for an
// endpoint built with New. Events nobody reads are dropped.
func (e *Endpoint) ConnEvents() <-chan ConnEvent { return e.events }

// Dial connects to a NATS server, giving up when ctx ends.
func Dial(ctx context.Context, url string, opts ...nats.Option) (*nats.Conn, error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	opts = append([]nats.Option{nats.Timeout(timeout), nats.MaxReconnects(60), nats.ReconnectWait(time.Second)}, opts...)
	nc, err := nats.Connect(ServerURL(url), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return nc, nil
}

// New builds an Endpoint on an existing connection, which the caller keeps owning.
func New(nc *nats.Conn, cfg Config) (*Endpoint, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// A send abandons the future of an attempt whose ack did not come (see publish); the
	// timeout drops such futures, well after the resends have ended.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(2*sendRetrySpan))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = cfg.Name
	}
	if cfg.Owner == "" {
		cfg.Owner = protocol.OwnerLocal
	}
	if cfg.Kind == "" {
		cfg.Kind = protocol.CardAgent
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = protocol.HeartbeatInterval
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 60 * time.Second
	}
	if cfg.AskAckWait <= 0 {
		cfg.AskAckWait = protocol.AnycastAckWait
	}
	if cfg.MaxAsks <= 0 {
		cfg.MaxAsks = 1
	}
	if cfg.InboxSize <= 0 {
		cfg.InboxSize = 256
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 3 * time.Second
	}
	if cfg.PositionEvery <= 0 {
		cfg.PositionEvery = 100 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	now := time.Now().UnixMilli()
	ctx, cancel := context.WithCancel(context.Background())
	seen := newDedupe(8192)
	me := protocol.Principal{Owner: cfg.Owner, Actor: cfg.Actor}
	return &Endpoint{
		ctx: ctx, cancel: cancel,
		nc: nc, js: js, cfg: cfg, log: log,
		me:       me,
		meID:     me.String(),
		inbox:    make(chan *Incoming, cfg.InboxSize),
		seen:     seen,
		pos:      newPositions(seen),
		status:   protocol.StatusIdle,
		since:    now,
		uid:      cfg.LifecycleUID,
		channels: map[string]*nats.Subscription{},
		backstop: map[string]string{},
		left:     map[string]uint64{},
		gates:    map[string]*gate{},
		joinedAt: map[string]uint64{},
		inboxes:  map[string]struct{}{},
	}, nil
}

func (c *Config) check() error {
	if err := protocol.CheckSpace(c.Space); err != nil {
		return fmt.Errorf("space: %w", err)
	}
	if err := protocol.CheckDisplayName(c.Name); err != nil {
		return err
	}
	actor := c.Actor
	if actor == "" {
		actor = c.Name
	}
	if !protocol.ValidActor(actor) {
		return fmt.Errorf("name %q is not a valid actor: use 1 to %d letters, digits or _ (no dots, dashes or spaces)", actor, protocol.MaxActorLength)
	}
	if c.Owner != "" && !protocol.ValidOwner(c.Owner) {
		return fmt.Errorf("owner %q is not a principal owner", c.Owner)
	}
	if c.Role != "" {
		if err := protocol.CheckRole(c.Role); err != nil {
			return err
		}
	}
	if c.LifecycleUID != "" && !protocol.ValidLifecycleUID(c.LifecycleUID) {
		return fmt.Errorf("lifecycle uid %q: want 26 to 32 of a-z 0-9", c.LifecycleUID)
	}
	return nil
}

// Principal is this endpoint's wire identity.
func (e *Endpoint) Principal() protocol.Principal { return e.me }

// Space is the space this endpoint belongs to.
func (e *Endpoint) Space() string { return e.cfg.Space }

// Conn is the underlying NATS connection.
func (e *Endpoint) Conn() *nats.Conn { return e.nc }

// JetStream is the JetStream context of the connection.
func (e *Endpoint) JetStream() jetstream.JetStream { return e.js }

// Messages delivers every surfaced message. Ack each one after handling it; a DM or
// anycast that is never acked is redelivered after the ack wait.
func (e *Endpoint) Messages() <-chan *Incoming { return e.inbox }

// Card is the AgentCard this endpoint advertises.
func (e *Endpoint) Card() protocol.AgentCard {
	return protocol.AgentCard{
		ID: e.me.String(), Name: e.cfg.Name, Kind: e.cfg.Kind, Role: e.cfg.Role,
		Description: e.cfg.Description, Meta: e.cfg.Meta, Skills: e.cfg.Skills, Tags: e.cfg.Tags,
		ProtocolVersion: protocol.ProtocolVersion, Owner: e.me.Owner, Actor: e.me.Actor,
	}
}

// Close leaves the space: it stops receiving, publishes a final offline presence record
// so peers see the departure at once, flushes pending acks and closes an owned
// connection. It is safe to call more than once.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	// CHAT's info is read once, for the history cursors and the live positions.
	chat := e.leavingInfo()
	e.noteLeaving(chat)
	// How far the live subscriptions got is confirmed while they still show what they
	// receive, so a post arriving during Close (not shown, see liveCut) cuts the live
	// position only after it.
	if chat != nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DeliveryTimeout)
		e.pos.confirms.Lock()
		e.confirmLiveAt(ctx, chat)
		e.pos.confirms.Unlock()
		cancel()
	}
	// Nothing reaches Messages() from here on: a copy in flight is handed back below.
	e.cancel()
	// The hand-off durable is drained before the daemon hears of the close, so every copy
	// delivered to this endpoint has passed onHandoff (which keeps each one it does not
	// ack) and no copy waits out its ack wait while later ones go to the next incarnation.
	e.drainHandoff()
	// What the application took is confirmed while the subscriptions still hold it, so the
	// daemon does not hand it to this incarnation again. Its answers are read last: the
	// daemon's work overlaps the rest of the close.
	answers := func(context.Context) {}
	e.pos.mu.Lock()
	tracked := len(e.pos.tracks) > 0
	e.pos.mu.Unlock()
	if tracked {
		answers = e.report(true)
	}
	e.mu.Lock()
	joined := e.present // a Join refused before it wrote presence leaves the record alone
	consumers := e.consumers
	subs := e.channels
	e.channels = map[string]*nats.Subscription{}
	e.mu.Unlock()

	for _, sub := range subs {
		_ = sub.Unsubscribe() // the connection closes below either way
	}
	for _, cc := range consumers {
		cc.Stop()
	}
	// Stop only asks the JetStream library's goroutine to unsubscribe. Until it has, the
	// broker still lists this endpoint's pull requests, and a copy naked below would be
	// redelivered here: dropped (back only after its ack wait) or acked as a duplicate of
	// the copy handed back (lost). Closed fires once the subscription is gone, and its
	// unsubscribe is written to the connection ahead of the naks.
	e.awaitConsumersStopped(consumers)
	// Whether another session consumes this principal's direct messages (then the record
	// stays online) is asked while the copies are handed back and the daemon answers.
	other := make(chan bool, 1)
	go func() { other <- joined && e.otherSessionLive() }()
	e.wg.Wait() // history readers and the heartbeat end with e.ctx
	// Durable copies never taken (held, handed back, or unread in Messages()) are
	// redelivered at once to the next incarnation, in the order they were stored.
	e.returnUnsettled()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DeliveryTimeout)
	answers(ctx)
	cancel()
	// The offline record comes last: a peer that sees it finds every copy settled.
	var errs []error
	if live := <-other; joined && !live {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if err := e.writePresence(ctx, protocol.StatusOffline); err != nil {
			errs = append(errs, fmt.Errorf("leave: presence: %w", err))
		}
		cancel()
	}
	if err := e.nc.FlushTimeout(3 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("leave: flush: %w", err))
	}
	if e.ownsNC {
		e.nc.Close()
	}
	return errors.Join(errs...)
}

func (e *Endpoint) lifecycleUID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.uid
}

func (e *Endpoint) setUID(uid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.uid = uid
}
