package a2apeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/protocol"
)

// Bridge presents every agent of a space's registry as a peer, for as long as Run runs:
// it follows the registry (an agent added, replaced or removed is joined, rejoined or
// left at once), and serves each agent on its own endpoint (see peer). Set fields before
// Run.
type Bridge struct {
	Space string
	// JS reads and watches the registry: the project's own identity (the provisioner).
	JS jetstream.JetStream
	// Connect connects to the space as the registered agent, with cfg as its card: on an
	// authenticated mesh with its own agent credential (principal local.<name>, no
	// channel, its DM durable and role durable), minted from the project's keys. Required.
	Connect func(ctx context.Context, r Registration, cfg client.Config) (*client.Endpoint, error)
	// Token returns the bearer token of a registration whose Token is set; nil means none
	// is kept, and such a registration is served without one (its calls then fail as the
	// agent refuses them).
	Token func(name string) (string, error)
	// HTTP is how external agents are reached.
	HTTP HTTP
	// Logger gets one line per peer joined or left and per call that failed; nil means
	// discard.
	Logger *slog.Logger
	// PollEvery is how often a task still running is asked for (tasks/get); 0 means 1 s.
	PollEvery time.Duration
	// TaskTimeout bounds how long an accepted task is followed before the asker is told
	// it gave no answer (and it is cancelled); 0 means 30 minutes.
	TaskTimeout time.Duration
	// RetryDelay is the wait before the second of three tries of a call that failed
	// transiently (it doubles); 0 means 1 s.
	RetryDelay time.Duration
	// MaxTasks bounds the tasks one agent is followed on at once; a message past it waits
	// in the agent's durable. 0 means 8.
	MaxTasks int
	// Now is the clock that dates accepted tasks and bounds following them; nil means
	// time.Now.
	Now func() time.Time
	// Ready, when set, is called once: when the registry was read and every agent in it
	// is being served.
	Ready func()
}

func (b *Bridge) check() error {
	switch {
	case protocol.CheckSpace(b.Space) != nil:
		return fmt.Errorf("space %q: %w", b.Space, protocol.CheckSpace(b.Space))
	case b.JS == nil:
		return errors.New("no JetStream context to read the registry with")
	case b.Connect == nil:
		return errors.New("no Connect to join the agents with")
	}
	return nil
}

func (b *Bridge) log() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return b.Logger
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// running is one served agent.
type running struct {
	rev    uint64
	cancel context.CancelFunc
	done   chan struct{}
}

// Run serves the registry until ctx ends (nil) or the registry cannot be followed.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("a2a bridge: %w", err)
	}
	kv, err := (&Store{JS: b.JS, Space: b.Space}).bucket(ctx)
	if err != nil {
		return fmt.Errorf("a2a bridge: %w", err)
	}
	w, err := kv.Watch(ctx, "*") // the registrations: a name has no dot, a task record's key has

	if err != nil {
		return fmt.Errorf("a2a bridge %s: watch the registry: %w", b.Space, err)
	}
	defer func() { _ = w.Stop() }()
	log := b.log().With("space", b.Space)
	peers := map[string]*running{}
	stop := func(name string) {
		if r := peers[name]; r != nil {
			r.cancel()
			<-r.done
			delete(peers, name)
			log.Info("a2a peer left", "name", name)
		}
	}
	defer func() {
		for name := range peers {
			stop(name)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("a2a bridge %s: the registry watch ended", b.Space)
			}
			if e == nil { // every row there was at the start has been seen
				if b.Ready != nil {
					b.Ready()
				}
				continue
			}
			name := e.Key()
			if e.Operation() != jetstream.KeyValuePut {
				stop(name)
				continue
			}
			reg, err := Decode(name, e.Value())
			if err != nil {
				log.Warn("a2a peer row refused", "name", name, "err", err)
				stop(name)
				continue
			}
			if r := peers[name]; r != nil && r.rev == e.Revision() {
				continue
			}
			stop(name)
			pctx, cancel := context.WithCancel(ctx)
			r := &running{rev: e.Revision(), cancel: cancel, done: make(chan struct{})}
			peers[name] = r
			p := &peer{b: b, reg: reg, log: log.With("peer", name)}
			go func() {
				defer close(r.done)
				p.run(pctx)
			}()
		}
	}
}

// peer serves one registered agent: it keeps it joined (rejoining after a lost
// connection) and turns what it receives into A2A calls.
type peer struct {
	b   *Bridge
	reg Registration
	log *slog.Logger

	mu      sync.Mutex
	waiting map[string]pendingInput // asker id -> the task that asked them something
	ctxs    map[string]string       // asker id -> the A2A context of its last exchange
	busy    int
}

// pendingInput is a task in input-required: the asker's next message continues it.
type pendingInput struct{ task, context string }

// maxAskers bounds the per-asker state a peer keeps.
const maxAskers = 1024

func (p *peer) run(ctx context.Context) {
	delay := time.Second
	for {
		err := p.serve(ctx)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("a2a peer stopped; joining again", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// card is the presence card of the agent.
func (p *peer) card() client.Config {
	desc := p.reg.Description
	if desc == "" {
		desc = "A2A agent " + p.reg.AgentName
	}
	meta := map[string]any{"connector": Harness, "a2a": map[string]any{"agent": p.reg.AgentName, "version": p.reg.Version, "protocolVersion": p.reg.ProtocolVersion}}
	return client.Config{Space: p.b.Space, Name: p.reg.Name, Actor: p.reg.Name, Role: p.reg.Role, Kind: protocol.CardAgent,
		Description: desc, Meta: meta, Skills: p.reg.Skills}
}

// serve joins once and handles messages until ctx ends (nil) or the endpoint fails.
func (p *peer) serve(ctx context.Context) error {
	if err := p.reg.Check(); err != nil {
		return err
	}
	token := ""
	if p.reg.Token && p.b.Token != nil {
		t, err := p.b.Token(p.reg.Name)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		token = t
	}
	ep, err := p.b.Connect(ctx, p.reg, p.card())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = ep.Close() }()
	if err := ep.Join(ctx); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	p.log.Info("a2a peer joined", "endpoint", redact.URL(p.reg.Endpoint))
	caller := &Caller{Endpoint: p.reg.Endpoint, Token: token, HTTP: p.b.HTTP}
	recs, err := p.recorded(ctx)
	if err != nil {
		return err
	}
	max := p.b.MaxTasks
	if max <= 0 {
		max = 8
	}
	slots := make(chan struct{}, max)
	var wg sync.WaitGroup
	defer wg.Wait()          // before ep.Close: the tasks answer through it
	for _, r := range recs { // tasks an earlier bridge accepted and never answered
		wg.Add(1)
		go func() {
			defer wg.Done()
			select { // a followed task holds a slot, as a new one does
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			p.working(ctx, ep, +1)
			defer func() { <-slots; p.working(ctx, ep, -1) }()
			p.resume(ctx, ep, caller, r)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ep.Lost():
			return fmt.Errorf("connection lost: %w", ep.LostErr())
		case in, ok := <-ep.Messages():
			if !ok {
				return errors.New("the endpoint closed")
			}
			if in.Kind != protocol.DeliveryDM && in.Kind != protocol.DeliveryAnycast {
				_ = in.Ack()
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				ep.HandBack(in) // naked at Close: the next bridge gets it at once
				return nil
			}
			wg.Add(1)
			p.working(ctx, ep, +1)
			go func() {
				defer wg.Done()
				defer func() { <-slots; p.working(ctx, ep, -1) }()
				p.handle(ctx, ep, caller, in)
			}()
		}
	}
}

// working counts tasks in hand and shows the peer working while there is one.
func (p *peer) working(ctx context.Context, ep *client.Endpoint, d int) {
	p.mu.Lock()
	p.busy += d
	busy := p.busy
	p.mu.Unlock()
	st := protocol.StatusIdle
	if busy > 0 {
		st = protocol.StatusWorking
	}
	if (d > 0 && busy == 1) || (d < 0 && busy == 0) {
		if err := ep.SetStatus(ctx, st); err != nil && ctx.Err() == nil {
			p.log.Debug("status", "err", err)
		}
	}
}
