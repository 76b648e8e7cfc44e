package liveness_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/liveness"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const space = "team"

// proxy is a loopback TCP proxy the test owns: cutting it is a network cut between an
// agent and the broker.
type proxy struct {
	ln       net.Listener
	target   string
	refusing atomic.Bool // new connections are closed at once
	mu       sync.Mutex
	pairs    []*pair
}

// pair is one proxied connection. A held pair keeps the broker's side open when the
// agent's side goes away, so the broker sees the old connection close only at release.
type pair struct {
	agent, broker net.Conn
	mu            sync.Mutex
	held          bool
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(target, "nats://")}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refusing.Load() {
				_ = a.Close()
				continue
			}
			b, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = a.Close()
				continue
			}
			pr := &pair{agent: a, broker: b}
			p.mu.Lock()
			p.pairs = append(p.pairs, pr)
			p.mu.Unlock()
			go pr.pipe(b, a)
			go pr.pipe(a, b)
		}
	}()
	return p
}

func (pr *pair) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = pr.agent.Close()
	pr.mu.Lock()
	held := pr.held
	pr.mu.Unlock()
	if !held {
		_ = pr.broker.Close()
	}
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

// cut closes every proxied connection on both sides.
func (p *proxy) cut() {
	p.mu.Lock()
	pairs := p.pairs
	p.pairs = nil
	p.mu.Unlock()
	for _, pr := range pairs {
		_ = pr.agent.Close()
		_ = pr.broker.Close()
	}
}

// down closes the listener and cuts every connection: the agent cannot come back.
func (p *proxy) down() {
	_ = p.ln.Close()
	p.cut()
}

// drop closes the agent's side of every proxied connection and holds the broker's side
// open; the returned func closes those.
func (p *proxy) drop() (release func()) {
	p.mu.Lock()
	pairs := p.pairs
	p.pairs = nil
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.mu.Lock()
		pr.held = true
		pr.mu.Unlock()
		_ = pr.agent.Close()
	}
	return func() {
		for _, pr := range pairs {
			_ = pr.broker.Close()
		}
	}
}

// fixture is an authenticated mesh with the space provisioned and a watcher running on
// the delivery daemon's credential and a system connection.
type fixture struct {
	t      testing.TB
	m      *meshtest.Mesh // nil on a cluster
	url    string         // the server agents join through by default
	mint   func(trust.UserSpec) []byte
	js     jetstream.JetStream // provisioner
	kv     jetstream.KeyValue  // presence, read by the provisioner
	marked chan protocol.Principal
}

func start(t testing.TB) *fixture {
	t.Helper()
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	kv, err := js.KeyValue(t.Context(), protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, m: m, url: m.URL, mint: func(u trust.UserSpec) []byte { return m.Mint(space, u) }, js: js, kv: kv,
		marked: make(chan protocol.Principal, 1024)}
	f.watch()
	return f
}

// startMesh is start without the watcher; watch starts it.
func startMesh(t testing.TB) *fixture {
	t.Helper()
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	kv, err := js.KeyValue(t.Context(), protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, m: m, url: m.URL, mint: func(u trust.UserSpec) []byte { return m.Mint(space, u) }, js: js, kv: kv,
		marked: make(chan protocol.Principal, 1024)}
}

// watch starts the watcher on the delivery daemon's credential and a system connection.
func (f *fixture) watch() {
	f.watchOn(meshtest.SystemConn(f.t, f.m.Chain, f.m.URL), f.m.Account(space).PublicKey(), nil)
}

// watchOn starts the watcher of account on sys, with the delivery daemon's credential on
// f.url for the presence bucket; configure, when set, sets more of its fields.
func (f *fixture) watchOn(sys *nats.Conn, account string, configure func(*liveness.Watcher)) {
	t := f.t
	t.Helper()
	dnc := meshtest.ConnectTo(t, f.url, f.mint(meshtest.DeliverySpec()))
	djs, err := jetstream.New(dnc)
	if err != nil {
		t.Fatal(err)
	}
	dkv, err := djs.KeyValue(t.Context(), protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	w := &liveness.Watcher{Space: space, Account: account, Sys: sys,
		Presence: dkv, Conn: dnc, Logger: brokertest.Logger(t), Marked: func(p protocol.Principal, _ time.Time) { f.marked <- p }}
	if configure != nil {
		configure(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- nil
		t.Fatalf("watcher: %v", err)
	}
}

// agentCreds mints an agent credential for actor with its DM durable pre-created.
func (f *fixture) agentCreds(actor, uid string) []byte {
	f.t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	if _, err := provision.Agent(f.t.Context(), f.js, space, p, uid, ""); err != nil {
		f.t.Fatal(err)
	}
	return f.mint(trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid})
}

// join connects an endpoint holding creds to url and joins the space.
func (f *fixture) join(url string, creds []byte, heartbeat time.Duration, opts ...nats.Option) *client.Endpoint {
	f.t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		f.t.Fatal(err)
	}
	ep, err := client.Connect(f.t.Context(), url, client.Config{Space: space, Name: c.Principal.Actor, LifecycleUID: c.LifecycleUID,
		Heartbeat: heartbeat, Logger: brokertest.Logger(f.t)},
		append([]nats.Option{nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix), nats.ReconnectWait(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	return ep
}

// status reads actor's presence status ("" when it has no entry).
func (f *fixture) status(actor string) (protocol.Status, uint64) {
	f.t.Helper()
	e, err := f.kv.Get(f.t.Context(), protocol.OwnerLocal+"."+actor)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0
	}
	if err != nil {
		f.t.Fatal(err)
	}
	var p protocol.Presence
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		f.t.Fatal(err)
	}
	return p.Status, e.Revision()
}

// watchOffline reports, on the returned channel, when actor's entry is next written
// offline (a reader's view: a KV watch).
func (f *fixture) watchOffline(actor string) <-chan time.Time {
	f.t.Helper()
	w, err := f.kv.Watch(f.t.Context(), protocol.OwnerLocal+"."+actor, jetstream.UpdatesOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var p protocol.Presence
			if json.Unmarshal(e.Value(), &p) == nil && p.Status == protocol.StatusOffline {
				out <- time.Now()
				return
			}
		}
	}()
	return out
}

// sentinel cuts a fresh agent's connection and waits until the watcher marked it: every
// event before the cut has then been applied. It returns the peers marked before it.
func (f *fixture) sentinel(name string) []string {
	f.t.Helper()
	px := newProxy(f.t, f.url)
	f.join(px.url(), f.agentCreds(name, protocol.NewLifecycleUID()), time.Hour)
	px.down()
	var before []string
	for {
		select {
		case p := <-f.marked:
			if p.Actor == name {
				return before
			}
			before = append(before, p.Actor)
		case <-time.After(10 * time.Second):
			f.t.Fatalf("sentinel %s was never marked offline", name)
		}
	}
}

// A network cut marks the agent offline at once, with the row a clean leave writes, long
// before its TTL; an agent on another connection stays online.
func TestCutMarksOffline(t *testing.T) {
	f := start(t)
	px := newProxy(t, f.m.URL)
	f.join(px.url(), f.agentCreds("alice", protocol.NewLifecycleUID()), time.Hour)
	f.join(f.m.URL, f.agentCreds("bob", protocol.NewLifecycleUID()), time.Hour)
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q after join, want idle", st)
	}
	seen := f.watchOffline("alice")
	cut := time.Now()
	px.down()
	select {
	case at := <-seen:
		t.Logf("alice offline %s after the cut", at.Sub(cut))
	case <-time.After(30 * time.Second): // a hang guard: a TTL expiry deletes the row and writes no offline one
		t.Fatal("alice was not written offline by the watcher")
	}
	if st, _ := f.status("alice"); st != protocol.StatusOffline {
		t.Fatalf("alice is %q, want offline", st)
	}
	if st, _ := f.status("bob"); st != protocol.StatusIdle {
		t.Fatalf("bob is %q, want idle: only the cut connection's peer goes offline", st)
	}
}

// An agent that reconnects and re-announces before the broker reports its old connection
// closed is never written offline by that report.
func TestReconnectStaysOnline(t *testing.T) {
	f := start(t)
	px := newProxy(t, f.m.URL)
	f.join(px.url(), f.agentCreds("alice", protocol.NewLifecycleUID()), 50*time.Millisecond)
	_, rev := f.status("alice")
	seen := f.watchOffline("alice")

	release := px.drop() // alice's side drops; the broker still holds the old connection
	meshtest.Until(t, "alice reconnected", 10*time.Second, func() bool {
		px.mu.Lock()
		defer px.mu.Unlock()
		return len(px.pairs) > 0
	})
	_, rev = f.status("alice")
	meshtest.Until(t, "alice re-announced on her new connection", 10*time.Second, func() bool {
		_, r := f.status("alice")
		return r > rev
	})
	release() // now the old connection closes
	if before := f.sentinel("sentinel"); len(before) > 0 {
		t.Fatalf("%v written offline by an old connection's close", before)
	}
	select {
	case <-seen:
		t.Fatal("alice was written offline by her old connection's close")
	default:
	}
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q, want idle", st)
	}
}

// A connection that is not an agent's (an observer credential naming the same
// principal) is ignored when it closes.
func TestNonAgentIgnored(t *testing.T) {
	f := start(t)
	// alice's row, online, with no agent connection the watcher knows of: only the
	// profile tells the observer's close apart.
	row, err := json.Marshal(protocol.Presence{Card: protocol.AgentCard{ID: "local.alice", Name: "alice", Kind: protocol.CardAgent},
		Status: protocol.StatusIdle, TS: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Put(t.Context(), "local.alice", row); err != nil {
		t.Fatal(err)
	}
	obs := f.m.Connect(f.m.Mint(space, trust.UserSpec{Name: "alice-view", Profile: trust.ProfileObserver,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}}))
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	obs.Close()
	if before := f.sentinel("sentinel"); len(before) > 0 {
		t.Fatalf("%v written offline by an observer connection's close", before)
	}
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q after an observer connection of hers closed, want idle", st)
	}
}

// A second session of the same agent closing leaves the agent online while the first
// is still connected.
func TestOtherSessionKeepsOnline(t *testing.T) {
	f := start(t)
	creds := f.agentCreds("alice", protocol.NewLifecycleUID())
	f.join(f.m.URL, creds, time.Hour)
	second := f.m.Connect(creds)
	if err := second.Flush(); err != nil {
		t.Fatal(err)
	}
	second.Close()
	if before := f.sentinel("sentinel"); len(before) > 0 {
		t.Fatalf("%v written offline while another connection is open", before)
	}
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q after her second connection closed, want idle", st)
	}
}

// An agent connected before the watcher started is found by the start sweep: its second
// session closing leaves it online.
func TestSweepFindsEarlierConnections(t *testing.T) {
	f := startMesh(t)
	creds := f.agentCreds("alice", protocol.NewLifecycleUID())
	f.join(f.m.URL, creds, time.Hour)
	second := f.m.Connect(creds)
	if err := second.Flush(); err != nil {
		t.Fatal(err)
	}
	f.watch()
	second.Close()
	if before := f.sentinel("sentinel"); len(before) > 0 {
		t.Fatalf("%v written offline while a connection made before the watcher is open", before)
	}
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q, want idle", st)
	}
}
