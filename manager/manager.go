// Package manager is the agent manager (`cotal supervise`): an ordinary peer of its
// space, named manager, that runs agents in seats (each in a pseudo-terminal, with the
// connectors of `cotal spawn`) and answers control requests over the mesh as the NATS
// micro service cotal-manager: spawn, ps, stop, attach and input.
//
// A request's caller is the principal in its subject, which the broker pins to the
// caller's credential: cotal.<space>.ctl.<service>.<owner>.<actor>.<op>. The manager
// service is the operator's alone (the project's own identity, as the operator the
// manager runs for): everything. The manager-agent service is for agents whose persona
// has capabilities: [spawn]: spawn a persona as the persona fixes it (never a program,
// arguments, folder, environment or role of its choosing), stop a seat it spawned (same
// owner) or itself, list the seats it spawned.
//
// One manager serves a space per host: it holds the row lease.<host> of the bucket
// cotal_manager_<space> while it runs. Its seats are recorded in their run folders
// (.cotal/run/<name>/seat.json), so a manager that takes over after one was killed adopts
// the seats still running (without their terminal) and reports those that ended, and
// never starts one twice.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Defaults of the Manager's timing fields.
const (
	DefaultWindow    = 30 * time.Second // spawn readiness window
	DefaultStopGrace = 10 * time.Second // SIGTERM to SIGKILL
	DefaultKeepEnded = 32               // ended seats ps keeps showing
	attachTTL        = 15 * time.Second // an attach session not renewed this long ends
	screenSize       = 256 << 10
)

// Manager runs seats for one space. Set fields before Run.
type Manager struct {
	// Connect connects the manager's peer (name manager, not yet joined); required.
	Connect func(ctx context.Context) (*client.Endpoint, error)
	Project *workspace.Project // required: personas, run folders, logs
	// Operator is the principal of the operator this manager runs for (the person at the
	// keyboard, local.<login>); required. Only it is answered on the operator rail, and no
	// seat is ever given its name.
	Operator protocol.Principal
	Space    string // required
	Servers  string // NATS URLs the agents connect to; required
	Auth     bool   // the mesh checks credentials: seats get a minted one
	// Mint mints an agent credential for spec (its durables created); required with Auth.
	Mint     func(ctx context.Context, spec trust.UserSpec) ([]byte, error)
	Exe      string // this binary: each agent's MCP server is `<Exe> mcp`; required
	Host     string // "" means os.Hostname
	Wait     bool   // wait for a live holder's lease instead of refusing
	Environ  func() []string
	LookPath func(string) (string, error)
	Getenv   func(string) string

	Window    time.Duration // 0 means DefaultWindow
	StopGrace time.Duration // 0 means DefaultStopGrace
	LeaseTTL  time.Duration // 0 means the bucket's TTL (provision.ManagerLeaseTTL)
	// KeepEnded is how many ended seats ps keeps showing (the most recently ended);
	// older ones are forgotten. 0 means DefaultKeepEnded.
	KeepEnded int
	Logger    *slog.Logger // nil means discard
	// RunStore opens the JetStream the manager drives workflow runs on (the WFJ journal
	// and the records bucket); nil means its own connection's.
	RunStore func(ctx context.Context) (jetstream.JetStream, error)
	// RunConfig, when set, adjusts each hosted run's driver configuration (tests inject
	// a clock or a crash point).
	RunConfig func(*rundriver.Config)
	// TurnNotice, for crash tests, runs when a hosted run's turn is registered here and
	// its seat is to be told of it: before the notice is sent (sent false: a manager
	// killed there never told the seat), and once it is stored, before that is recorded
	// (sent true).
	TurnNotice func(goalID string, sent bool)

	log      *slog.Logger
	ep       *client.Endpoint
	instance string
	// instanceID and epoch are this manager's ep instance id (stable per host) and this
	// run's incarnation: the revision of its lease row's creation, which only grows.
	instanceID string
	epoch      uint64
	contract   mgrclient.EPContract // what describe answers and the contract store holds
	started    time.Time

	mu       sync.Mutex
	seats    map[string]*seat       // by name, running and ended
	presence map[string]client.Peer // by actor (owner local)
	presCh   chan struct{}          // closed and replaced at every presence change applied
	presGen  int                    // presence changes applied (each one wake-up)
	wg       sync.WaitGroup
	ctx      context.Context
	host     *runHost // the runs it drives (runs.go); nil until hosting opens
}

func (m *Manager) check() error {
	switch {
	case m.Connect == nil:
		return errors.New("no Connect")
	case m.Project == nil:
		return errors.New("no project")
	case m.Operator.Validate() != nil:
		return errors.New("no operator principal")
	case m.Space == "" || m.Servers == "":
		return errors.New("no space or servers")
	case m.Auth && m.Mint == nil:
		return errors.New("an authenticated mesh needs Mint")
	case m.Exe == "":
		return errors.New("no cotal executable")
	}
	return nil
}

// Run takes the lease, adopts the seats a previous manager left, serves until ctx ends
// (calling ready, when not nil, once it serves), then stops every seat it started and releases the lease. It returns ErrLeaseHeld
// (wrapped, naming the holder) when another manager serves this space on this host.
func (m *Manager) Run(ctx context.Context, ready func()) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("manager %s: config: %w", m.Space, err)
	}
	m.log = m.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.Host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		m.Host = h
	}
	if m.Window <= 0 {
		m.Window = DefaultWindow
	}
	if m.StopGrace <= 0 {
		m.StopGrace = DefaultStopGrace
	}
	if m.KeepEnded <= 0 {
		m.KeepEnded = DefaultKeepEnded
	}
	if m.LeaseTTL <= 0 {
		m.LeaseTTL = provision.ManagerLeaseTTL
	}
	if m.Environ == nil {
		m.Environ = os.Environ
	}
	m.instance = protocol.Token(fmt.Sprintf("%s-%d-%d", m.Host, os.Getpid(), time.Now().UnixNano()))
	m.seats = map[string]*seat{}
	m.presence = map[string]client.Peer{}
	m.presCh = make(chan struct{})

	ep, err := m.Connect(ctx)
	if err != nil {
		return fmt.Errorf("manager %s: connect: %w", m.Space, err)
	}
	defer ep.Close()
	m.ep = ep

	kv, err := ep.JetStream().KeyValue(ctx, protocol.BucketManager(m.Space))
	if err != nil {
		return fmt.Errorf("manager %s: lease bucket (provision the space with this cotal: cotal up): %w", m.Space, err)
	}
	me, err := workspace.ProcessRecord(os.Getpid())
	if err != nil {
		return fmt.Errorf("manager %s: %w", m.Space, err)
	}
	m.instanceID = InstanceID(m.Host)
	l := &lease{kv: kv, key: LeaseKey(m.instanceID), ttl: m.LeaseTTL,
		me: LeaseInfo{Holder: ep.Principal().String(), InstanceID: m.instanceID, Runtime: "pty", Root: m.Project.Root,
			PID: me.PID, Run: m.instance, Host: m.Host, Start: me.Start}}
	if err := l.acquire(ctx, m.Wait, func(h fmt.Stringer) { m.log.Info("waiting for the manager lease", "holder", h.String()) }); err != nil {
		return fmt.Errorf("manager %s: lease: %w", m.Space, err)
	}
	if e, err := kv.Get(ctx, l.key); err == nil {
		m.epoch = e.Revision()
	} else {
		return fmt.Errorf("manager %s: read its lease row: %w", m.Space, err)
	}
	m.started = time.Now()
	served := make([]string, 0, len(epServed))
	for c := range epServed {
		served = append(served, c)
	}
	if m.contract, err = mgrclient.NewEPContract(served); err != nil {
		return fmt.Errorf("manager %s: %w", m.Space, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := l.release(rctx); err != nil {
			m.log.Warn("release lease", "err", err)
		}
	}()

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	m.ctx = sctx
	if err := ep.Join(sctx); err != nil {
		return fmt.Errorf("manager %s: join: %w", m.Space, err)
	}
	changes, err := ep.WatchPresence(sctx)
	if err != nil {
		return fmt.Errorf("manager %s: watch presence: %w", m.Space, err)
	}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.watchPresence(changes) }()

	m.adopt()
	m.hostRuns(sctx)

	svc, err := m.serve()
	if err != nil {
		stop()
		m.wg.Wait()
		return fmt.Errorf("manager %s: service: %w", m.Space, err)
	}
	epSubs, err := m.serveEP()
	if err != nil {
		_ = svc.Stop()
		stop()
		m.wg.Wait()
		return fmt.Errorf("manager %s: endpoint rails: %w", m.Space, err)
	}
	defer func() {
		for _, s := range epSubs {
			_ = s.Unsubscribe()
		}
	}()
	// Serving means the broker has the service's subscriptions: a request sent once ready
	// returns reaches it.
	fctx, fcancel := context.WithTimeout(sctx, 10*time.Second)
	err = ep.Conn().FlushWithContext(fctx)
	fcancel()
	if err != nil {
		_ = svc.Stop()
		stop()
		m.wg.Wait()
		return fmt.Errorf("manager %s: service: %w", m.Space, err)
	}
	// What a reference caller needs to find and call this manager: the contract artifacts
	// and the service record. Go's own callers need neither, so a failure is told, not fatal.
	if err := m.publishContract(sctx); err != nil {
		m.log.Warn("publish the manager's contract artifacts: reference callers cannot resolve it", "err", err)
	}
	records, err := m.register(sctx)
	if err != nil {
		m.log.Warn("register the manager's service record: reference callers cannot list it", "err", err)
	}
	if ready != nil {
		ready()
	}

	renew := time.NewTicker(m.LeaseTTL / 3)
	defer renew.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ep.Lost():
			runErr = fmt.Errorf("manager %s: connection lost: %w", m.Space, ep.LostErr())
			break loop
		case <-renew.C:
			if err := l.renew(ctx); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) {
					runErr = fmt.Errorf("manager %s: lease lost: %w", m.Space, err)
					break loop
				}
				m.log.Warn("renew lease", "err", err)
			}
		}
	}
	for _, s := range epSubs {
		_ = s.Unsubscribe()
	}
	_ = svc.Stop()
	m.stopAll()
	if records != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		if err := m.deregister(dctx, records); err != nil {
			m.log.Warn("remove the manager's service record", "err", err)
		}
		cancel()
	}
	stop()
	m.wg.Wait()
	return runErr
}

// presenceEvery is the least time between two presence updates the manager applies: the
// changes in between are coalesced, the latest per peer kept.
const presenceEvery = 100 * time.Millisecond

// watchPresence keeps the roster the seats' mesh state and settles read. A peer that
// writes its presence in a loop costs a map write per change: changes are kept per peer
// (the latest wins) and applied at most once per presenceEvery, each application one
// lock and one wake-up of the seats waiting on presence. A change after a quiet spell is
// applied at once.
func (m *Manager) watchPresence(ch <-chan client.PeerChange) {
	pending := map[string]client.Peer{} // by card id
	var (
		last  time.Time
		timer *time.Timer
		tick  <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				m.applyPresence(pending)
				return
			}
			pending[c.Card.ID] = c.Peer
			if tick != nil {
				continue // an application is due
			}
			if wait := presenceEvery - time.Since(last); wait > 0 {
				timer = time.NewTimer(wait)
				tick = timer.C
				continue
			}
		case <-tick:
			timer, tick = nil, nil
		}
		m.applyPresence(pending)
		clear(pending)
		last = time.Now()
	}
}

// applyPresence takes the latest presence of each peer in pending into the roster and
// wakes whoever waits on a change.
func (m *Manager) applyPresence(pending map[string]client.Peer) {
	if len(pending) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, peer := range pending {
		p, err := protocol.ParsePrincipal(id)
		if err != nil || p.Owner != protocol.OwnerLocal {
			continue
		}
		m.presence[p.Actor] = peer
	}
	close(m.presCh)
	m.presCh = make(chan struct{})
	m.presGen++
}

// meshState is how the roster shows actor: its status, offline, or not in roster.
func (m *Manager) meshState(actor string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.presence[actor]
	if !ok {
		return "not in roster"
	}
	return string(p.State())
}

// online reports whether actor is online in the roster, and a channel closed at the next
// change.
func (m *Manager) online(actor string) (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.presence[actor]
	return ok && p.Online, m.presCh
}

// serve registers the micro service and its endpoints.
func (m *Manager) serve() (micro.Service, error) {
	svc, err := micro.AddService(m.ep.Conn(), micro.Config{
		Name:        protocol.ManagerServiceName,
		Version:     "1.0.0",
		Description: "cotal agent manager of space " + m.Space + " on " + m.Host,
		Metadata:    map[string]string{"space": m.Space, "host": m.Host, "instance": m.instance},
	})
	if err != nil {
		return nil, err
	}
	for _, op := range protocol.MgrOps {
		if err := svc.AddEndpoint(op, micro.HandlerFunc(m.handle), micro.WithEndpointSubject(protocol.MgrAnyFilter(m.Space, op))); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("endpoint %s: %w", op, err)
		}
	}
	return svc, nil
}
