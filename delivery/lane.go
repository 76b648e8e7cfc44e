// Package delivery is the delivery daemon of a space, built as a lane: the durable
// backstop of durable channels, the space's delivery lease, the delivery ctl rail (durable
// join, leave, list), the privileged liveness oracle and the plain liveness probe, and the
// timer writer that arms the space's timer plane (timers.go).
//
// Data flow: every post of CHAT_<space> is read, in order, by the daemon's durable
// "fanout". For a post on a durable channel the daemon writes one copy per member whose
// membership row covers it (cotal_members_<space>) and whose read ACL admits it
// (cotal_acl_<space>, taken from the member's own credential at its durable join), to the
// member's hand-off subject cotal.<space>.dlv.<owner>.<actor>.<uid> in DLV_<space>; a post
// on a live channel is copied to the members it @mentions. The member binds its hand-off
// durable dlv_<owner>-<actor>-<uid> (created by the daemon, bind-only for the member) and
// acks each copy once surfaced. The post is acked on CHAT only after all its copies are
// stored; a copy's Nats-Msg-Id "<msgId>:<owner>.<actor>.<uid>:<generation>" makes a
// second write within DLV's two-hour window a no-op.
package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/liveness"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Defaults of the Lane's durations.
const (
	DefaultBrokerGone    = 15 * time.Second
	DefaultReconnectWait = 250 * time.Millisecond
	DefaultAckWait       = 60 * time.Second // the reference's fan-out ack wait
	DefaultOpTimeout     = 5 * time.Second
	// DefaultPositionGrace is how long the fan-out defers the copies of a member reading
	// the channel live, waiting for its confirmed position to cover them: a few times the
	// Go SDK's 100 ms position period.
	DefaultPositionGrace = 500 * time.Millisecond
	// DefaultReaderTTL is how long a member counts as reading live after it was last heard
	// from (the Go SDK confirms at least every second while connected).
	DefaultReaderTTL = 5 * time.Second
)

var (
	// ErrLeaseHeld is returned by Run when another daemon holds the space's lease; the
	// error names the holder.
	ErrLeaseHeld = errors.New("the delivery lease is held")
	// ErrFenced is returned by Run when another daemon took the lease over while this one
	// served; the error names the new holder.
	ErrFenced = errors.New("the delivery lease was taken over")
	// ErrBrokerGone is returned by Run when the broker was unreachable for BrokerGone.
	ErrBrokerGone = errors.New("broker connection unavailable")
	// ErrNotProvisioned is returned by Run when the space lacks a stream or bucket of the
	// durable plane.
	ErrNotProvisioned = errors.New("space is not provisioned for delivery")
)

// Lane serves one space's durable plane. Set its fields before Run; a Lane may be run
// again after Run returned.
type Lane struct {
	Space  string // space token; required
	Server string // NATS URL of the broker; required
	TLSCA  string // CA file (PEM) the broker's TLS certificate is checked against; "" means the system's roots
	// Creds is the daemon's credential (profile delivery) of the space's account, in creds
	// file format; required. It never mints: members' ACLs come from their own credentials.
	Creds []byte
	// SystemCreds is an optional system-account credential. With it the oracle asks every
	// server ($SYS.REQ.SERVER.PING.CONNZ, filtered to the space's account) over a system
	// connection; without it, through the broker's per-account CONNZ import from the
	// daemon's own connection, which the broker scopes to the same account.
	SystemCreds []byte
	// EvictCreds is an optional system-account credential that may KICK (trust.EvictCreds).
	// With it and SystemCreds the delivery-admin rail answers evictPrincipal and
	// evictPrincipals, connecting with it for each eviction; without it they are refused.
	EvictCreds []byte
	Logger     *slog.Logger // nil means discard
	Instance   string       // this run's lease identity; "" means a random one per Run
	// Version is the build serving (cotal's version), written in the lease row so that
	// cotal endpoints can say which build holds the space; "" writes none.
	Version string
	// WaitForLease makes Run wait for a held lease to be released or to expire, instead of
	// returning ErrLeaseHeld.
	WaitForLease  bool
	RenewEvery    time.Duration // lease renewal period; 0 means half the lease bucket's TTL
	BrokerGone    time.Duration // how long the broker may be unreachable; 0 means 15 s
	ReconnectWait time.Duration // between reconnect attempts; 0 means 250 ms
	AckWait       time.Duration // fan-out redelivery of an unacked post, set when the durable is created; 0 means 60 s
	OpTimeout     time.Duration // bound of one broker operation; 0 means 5 s
	// PositionGrace is how long the fan-out defers a round's copies for members reading
	// the channel live (they confirm positions), and copies only what their positions did
	// not cover by then; 0 means 500 ms.
	PositionGrace time.Duration
	// ReaderTTL is how long after its last position confirmation a member still counts as
	// reading live; 0 means 5 s.
	ReaderTTL time.Duration

	abandon bool // tests: stop like a crash, leaving the lease to expire
}

// check validates the fields without I/O and fills in the defaults of a copy.
func (l *Lane) check() (Lane, error) {
	c := *l
	if err := protocol.CheckSpace(c.Space); err != nil {
		return c, err
	}
	if c.Server == "" {
		return c, errors.New("no broker URL")
	}
	if len(c.Creds) == 0 {
		return c, errors.New("no credential: the daemon needs one of profile delivery")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"renew period", &c.RenewEvery, 0},
		{"broker-gone window", &c.BrokerGone, DefaultBrokerGone},
		{"reconnect wait", &c.ReconnectWait, DefaultReconnectWait},
		{"ack wait", &c.AckWait, DefaultAckWait},
		{"operation timeout", &c.OpTimeout, DefaultOpTimeout},
		{"position grace", &c.PositionGrace, DefaultPositionGrace},
		{"reader ttl", &c.ReaderTTL, DefaultReaderTTL},
	} {
		if *d.v < 0 {
			return c, fmt.Errorf("%s %s: want a positive duration", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Instance == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
		c.Instance = hex.EncodeToString(b)
	}
	return c, nil
}

// Run opens the lane, takes the lease, calls ready once the lane serves, and blocks until
// ctx ends (nil, after releasing the lease) or the lane fails: ErrLeaseHeld, ErrFenced,
// ErrBrokerGone, ErrNotProvisioned or a connection error, wrapped with the space.
func (l *Lane) Run(ctx context.Context, ready func()) error {
	c, err := l.check()
	if err != nil {
		return fmt.Errorf("delivery %s: config: %w", l.Space, err)
	}
	r := &run{cfg: c, space: c.Space, instance: c.Instance, log: c.Logger.With("space", c.Space),
		opTimeout: c.OpTimeout, gate: newGate(), connSig: make(chan struct{}, 1)}
	if err := r.serve(ctx, ready); err != nil {
		return fmt.Errorf("delivery %s: %w", c.Space, err)
	}
	return nil
}

// run is the state of one Run.
type run struct {
	cfg       Lane
	space     string
	instance  string
	log       *slog.Logger
	opTimeout time.Duration
	gate      *gate

	ctx    context.Context // the workers' lifetime
	self   string          // the daemon's own principal, "<owner>.<actor>"; "" when its credential names none
	nc     *nats.Conn
	js     jetstream.JetStream
	verify *verifier

	leaseKV, members, aclKV, channelsKV jetstream.KeyValue
	classes                             *view[channelRow, classes]
	roster                              *view[memberRow, roster]
	acls                                *view[*ACL, acls]
	fanout                              *fanout
	lease                               *lease
	readers                             *readers

	// chatKnown is a CHAT sequence known stored: the highest CHAT's info reported or the
	// fan-out was delivered (see chatLast).
	chatKnown atomic.Uint64

	connMu  sync.Mutex
	connUp  bool
	connSig chan struct{}
}

// serve is Run after the config check.
func (r *run) serve(ctx context.Context, ready func()) (err error) {
	creds, err := trust.ReadCreds(r.cfg.Creds)
	if err != nil {
		return err
	}
	uc, err := jwt.DecodeUserClaims(creds.JWT)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	account := uc.IssuerAccount
	if account == "" {
		account = uc.Issuer
	}
	r.verify = &verifier{account: account, issuers: []string{account, uc.Issuer}, cache: newClaimsCache(claimsCacheSize)}
	if creds.Principal.Validate() == nil {
		r.self = creds.Principal.String()
	}

	if err := r.dial(creds); err != nil {
		return err
	}
	defer r.nc.Close()
	if r.js, err = jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(2*maxInFlight)); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if err := r.open(ctx); err != nil {
		return err
	}

	host, _ := os.Hostname()
	holder := r.self
	if holder == "" {
		holder = creds.Name
	}
	st, err := r.leaseKV.Status(ctx)
	if err != nil {
		return fmt.Errorf("lease bucket: %w", err)
	}
	r.lease = &lease{kv: r.leaseKV, conn: r.nc, ttl: st.TTL(),
		me: LeaseInfo{Holder: holder, Instance: r.instance, Host: host, PID: os.Getpid(), Since: time.Now().UnixMilli(),
			Version: r.cfg.Version}}
	if r.lease.ttl <= 0 {
		return fmt.Errorf("%w: lease bucket %s has no TTL, so a dead holder would hold it forever; run `cotal up --space %s`",
			ErrNotProvisioned, protocol.BucketDelivery(r.space), r.space)
	}
	renew := r.cfg.RenewEvery
	if renew == 0 {
		renew = r.lease.ttl / 2
	}
	if err := r.acquire(ctx); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("lease: %w", err)
	}
	fenced := false
	defer func() {
		if r.cfg.abandon || fenced || !r.nc.IsConnected() {
			return // a broker that is gone cannot be asked; the lease expires by itself
		}
		r.releaseLease(context.WithoutCancel(ctx))
	}()

	wctx, stopWorkers := context.WithCancel(ctx)
	r.ctx = wctx
	var wg sync.WaitGroup
	defer func() {
		r.gate.set(false)
		stopWorkers()
		wg.Wait()
	}()
	if err := r.start(wctx, &wg); err != nil {
		return err
	}
	leaseEvents, err := r.watchLease(wctx, &wg)
	if err != nil {
		return err
	}
	r.gate.set(true)
	r.lease.me.Ready = true
	if err := r.withTimeout(ctx, r.lease.renew); err != nil {
		r.gate.set(false)
		return fmt.Errorf("lease: mark ready: %w", err)
	}
	r.log.Info("serving", "instance", r.instance, "lease ttl", r.lease.ttl)
	if ready != nil {
		ready()
	}

	err = r.loop(ctx, renew, leaseEvents)
	fenced = errors.Is(err, ErrFenced)
	return err
}

// dial connects with the daemon's credential and forwards connection state changes.
func (r *run) dial(creds trust.Creds) error {
	signal := func(up bool) {
		r.connMu.Lock()
		r.connUp = up
		r.connMu.Unlock()
		select {
		case r.connSig <- struct{}{}:
		default:
		}
	}
	nc, err := nats.Connect(r.cfg.Server, append(client.TLSOptions(r.cfg.TLSCA),
		nats.UserJWTAndSeed(creds.JWT, creds.Seed), nats.CustomInboxPrefix(creds.InboxPrefix),
		nats.Name("cotal delivery "+r.space), nats.Timeout(r.opTimeout),
		nats.MaxReconnects(-1), nats.ReconnectWait(r.cfg.ReconnectWait),
		nats.PingInterval(2500*time.Millisecond), nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // closed by the lane itself
			}
			r.log.Warn("broker connection lost", "err", err)
			signal(false)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			r.log.Info("broker connection back")
			signal(true)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			subj := ""
			if s != nil {
				subj = s.Subject
			}
			r.log.Warn("broker error", "subscription", subj, "err", err)
		}),
	)...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", r.cfg.Server, err)
	}
	r.nc = nc
	r.connMu.Lock()
	r.connUp = nc.IsConnected()
	r.connMu.Unlock()
	return nil
}

// open binds the streams and buckets of the durable plane, which `cotal up` creates.
func (r *run) open(ctx context.Context) error {
	missing := func(what string, err error) error {
		if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("%w: %s is missing on %s; run `cotal up --space %s` to provision it", ErrNotProvisioned, what, r.cfg.Server, r.space)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, s := range []string{protocol.StreamChat(r.space), protocol.StreamDLV(r.space)} {
		if _, err := r.js.Stream(ctx, s); err != nil {
			return missing("stream "+s, err)
		}
	}
	for _, b := range []struct {
		name string
		kv   *jetstream.KeyValue
	}{
		{protocol.BucketDelivery(r.space), &r.leaseKV},
		{protocol.BucketMembers(r.space), &r.members},
		{protocol.BucketACL(r.space), &r.aclKV},
		{protocol.BucketChannels(r.space), &r.channelsKV},
	} {
		kv, err := r.js.KeyValue(ctx, b.name)
		if err != nil {
			return missing("bucket "+b.name, err)
		}
		*b.kv = kv
	}
	return nil
}

// start loads the views, binds the fan-out durable and starts the workers (the fan-out
// and the mixed inbox's reader) and rails.
func (r *run) start(ctx context.Context, wg *sync.WaitGroup) error {
	r.classes = newView(r.js, r.channelsKV, protocol.BucketChannels(r.space), decodeChannel, buildClasses, r.log)
	r.roster = newView(r.js, r.members, protocol.BucketMembers(r.space), decodeMembership, buildRoster, r.log)
	r.acls = newView(r.js, r.aclKV, protocol.BucketACL(r.space), aclDecoder(r.space), buildACLs, r.log)
	loads := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	for i, run := range []func(context.Context, chan<- struct{}) error{r.classes.run, r.roster.run, r.acls.run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = run(ctx, loads[i])
		}()
	}
	t := time.NewTimer(4 * r.opTimeout)
	defer t.Stop()
	for _, l := range loads {
		select {
		case <-l:
		case <-t.C:
			return errors.New("the members, ACL and channel buckets did not load")
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	r.readers = newReaders(r.cfg.ReaderTTL, time.Now)
	r.fanout = &fanout{space: r.space, js: r.js, ackWait: r.cfg.AckWait, classes: r.classes, roster: r.roster, acls: r.acls,
		gate: r.gate, log: r.log, syncWait: r.opTimeout, catchups: make(chan memberRow, 256),
		readers: r.readers, grace: r.cfg.PositionGrace, chatKnown: &r.chatKnown}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = r.fanout.run(ctx)
	}()
	inbox := &inboxReader{space: r.space, js: r.js, ackWait: r.cfg.AckWait, roster: r.roster, acls: r.acls,
		gate: r.gate, log: r.log, syncWait: r.opTimeout}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = inbox.run(ctx)
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		superviseTimerWriter(ctx, &TimerWriter{Space: r.space, JS: r.js, Logger: r.log})
	}()

	orc, err := r.newOracle()
	if err != nil {
		return err
	}
	if orc.nc != nil && orc.nc != r.nc {
		wg.Add(1)
		go func() { // the system connection lives as long as the workers
			defer wg.Done()
			<-ctx.Done()
			orc.nc.Close()
		}()
	}
	r.startLiveness(ctx, wg, orc)
	c := &ctl{r: r}
	c.start(ctx, wg)
	for _, s := range []struct {
		subject, queue string
		handle         nats.MsgHandler
	}{
		{protocol.CtlFilter(r.space, protocol.ServiceDelivery), "delivery", c.dispatch},
		{protocol.CtlFilter(r.space, protocol.ServiceDeliveryAdmin), "delivery-admin", workers(ctx, wg, adminWorkers, orc.handle)},
		{protocol.LiveSubject(r.space, protocol.PlaneDelivery, protocol.Principal{Owner: "*", Actor: "*"}), "live.delivery", r.probe},
	} {
		sub, err := r.nc.QueueSubscribe(s.subject, s.queue, s.handle)
		if err != nil {
			return fmt.Errorf("answer %s: %w", s.subject, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done()
			_ = sub.Unsubscribe()
		}()
	}
	if err := r.nc.FlushTimeout(r.opTimeout); err != nil {
		return fmt.Errorf("answer the delivery rails: %w", err)
	}
	return nil
}

// startLiveness starts the presence liveness watcher over the oracle's system connection:
// an agent is marked offline as soon as its connection drops. Without a system
// connection, presence goes offline by its TTL only, and the log says so.
func (r *run) startLiveness(ctx context.Context, wg *sync.WaitGroup, orc *oracle) {
	if orc.nc == nil || orc.account == "" {
		r.log.Info("presence goes offline by its TTL only: the daemon has no system-account connection (--system-creds)")
		return
	}
	kv, err := r.js.KeyValue(ctx, protocol.BucketPresence(r.space))
	if err != nil {
		r.log.Warn("presence goes offline by its TTL only: the presence bucket cannot be opened", "err", err)
		return
	}
	w := &liveness.Watcher{Space: r.space, Account: orc.account, Sys: orc.nc, Presence: kv, Conn: r.nc, Logger: r.log,
		OpTimeout: r.opTimeout}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx, nil); err != nil {
			r.log.Warn("presence goes offline by its TTL only", "err", err)
		}
	}()
}

// newOracle builds the liveness oracle's broker access.
func (r *run) newOracle() (*oracle, error) {
	o := &oracle{r: r, nc: r.nc}
	if len(r.cfg.EvictCreds) > 0 {
		ec, err := trust.ReadCreds(r.cfg.EvictCreds)
		if err != nil {
			return nil, fmt.Errorf("evict credential: %w", err)
		}
		o.evictor = &ec
	}
	if len(r.cfg.SystemCreds) == 0 {
		return o, nil
	}
	sc, err := trust.ReadCreds(r.cfg.SystemCreds)
	if err != nil {
		return nil, fmt.Errorf("system credential: %w", err)
	}
	nc, err := nats.Connect(r.cfg.Server, append(client.TLSOptions(r.cfg.TLSCA), nats.UserJWTAndSeed(sc.JWT, sc.Seed), nats.CustomInboxPrefix(sc.InboxPrefix), nats.Name("cotal delivery oracle "+r.space),
		nats.Timeout(r.opTimeout), nats.MaxReconnects(-1), nats.ReconnectWait(r.cfg.ReconnectWait))...)
	if err != nil {
		r.log.Warn("the liveness oracle cannot sweep", "err", err)
		o.nc, o.note = nil, "no system connection: "+err.Error()
		return o, nil
	}
	o.nc, o.account = nc, r.verify.account
	return o, nil
}

// loop keeps the lease and watches the broker until ctx ends or the lane must stop.
func (r *run) loop(ctx context.Context, renewEvery time.Duration, leaseEvents <-chan jetstream.KeyValueEntry) error {
	renew := time.NewTicker(renewEvery)
	defer renew.Stop()
	var gone *time.Timer
	var goneC <-chan time.Time
	defer func() {
		if gone != nil {
			gone.Stop()
		}
	}()
	quiet := false // a lost lease was announced; say so again only on the next edge
	quiesce := func(why string) {
		if r.gate.isOpen() {
			r.gate.set(false)
			r.log.Warn("stopped serving while it re-checks who owns the lease", "why", why)
		}
	}
	recheck := func() error {
		var reading leaseReading
		var holder LeaseInfo
		err := r.withTimeout(ctx, func(c context.Context) error {
			var err error
			reading, holder, err = r.lease.recheck(c)
			return err
		})
		switch reading {
		case leaseOurs:
			if !r.gate.isOpen() {
				r.gate.set(true)
				r.log.Info("serving again: the lease is still this daemon's")
			}
			quiet = false
			return nil
		case leaseTaken:
			return fmt.Errorf("%w by %s; exiting so the holder is single", ErrFenced, holder)
		}
		if !quiet {
			r.log.Warn("cannot tell who holds the lease yet", "err", err)
			quiet = true
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-goneC:
			return fmt.Errorf("%w for %s (broker at %s unreachable), exiting (coupled to the broker)", ErrBrokerGone, r.cfg.BrokerGone, r.cfg.Server)
		case <-r.connSig:
			r.connMu.Lock()
			up := r.connUp
			r.connMu.Unlock()
			if !up && gone == nil {
				gone = time.NewTimer(r.cfg.BrokerGone)
				goneC = gone.C
				quiesce("broker connection lost")
			}
			if up && gone != nil {
				gone.Stop()
				gone, goneC = nil, nil
				if err := recheck(); err != nil {
					return err
				}
			}
		case <-renew.C:
			if gone != nil {
				continue
			}
			if err := r.withTimeout(ctx, r.lease.renew); err != nil {
				quiesce("renewal failed: " + err.Error())
				if err := recheck(); err != nil {
					return err
				}
			} else if !r.gate.isOpen() {
				r.gate.set(true) // a renewal is proof the lease is still this daemon's
				r.log.Info("serving again: the lease renewed")
			}
		case e := <-leaseEvents:
			if e.Operation() == jetstream.KeyValuePut {
				if info, err := decodeLease(e.Value()); err == nil && info.Instance == r.instance {
					continue
				}
			}
			quiesce("the lease changed hands")
			if err := recheck(); err != nil {
				return err
			}
		}
	}
}

func (r *run) withTimeout(ctx context.Context, f func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	return f(c)
}

// chatLast is CHAT's last sequence now.
func (r *run) chatLast(ctx context.Context) (uint64, error) {
	s, err := r.js.Stream(ctx, protocol.StreamChat(r.space))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", protocol.StreamChat(r.space), err)
	}
	last := s.CachedInfo().State.LastSeq
	raise(&r.chatKnown, last)
	return last, nil
}

// chatAtLeast returns a CHAT sequence known stored that is at least seq if this daemon
// knows one (a post the fan-out was delivered, or CHAT's info read earlier), else CHAT's
// last sequence now.
func (r *run) chatAtLeast(ctx context.Context, seq uint64) (uint64, error) {
	if known := r.chatKnown.Load(); known >= seq {
		return known, nil
	}
	return r.chatLast(ctx)
}

// raise moves mark up to seq.
func raise(mark *atomic.Uint64, seq uint64) {
	for {
		cur := mark.Load()
		if seq <= cur || mark.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// reply answers a rail request with data or err.
func (r *run) reply(m *nats.Msg, data any, err error) {
	rep := protocol.ControlReply{OK: err == nil}
	if err != nil {
		rep.Error = err.Error()
	} else if data != nil {
		b, merr := json.Marshal(data)
		if merr != nil {
			rep.OK, rep.Error = false, "encode answer: "+merr.Error()
		} else {
			rep.Data = b
		}
	}
	b, _ := json.Marshal(rep)
	if perr := r.nc.Publish(m.Reply, b); perr != nil {
		r.log.Debug("reply", "subject", m.Reply, "err", perr)
	}
}
