package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const (
	fanoutMembers = 10
	fanoutPosts   = 1000 // per measured round: CHAT keeps 1000 posts per sender and channel
)

// durableMesh is an authenticated broker with one provisioned space and its delivery
// daemon serving.
type durableMesh struct {
	url  string
	acct *trust.Account
	js   jetstream.JetStream
}

func newDurableMesh(b *testing.B) *durableMesh {
	b.Helper()
	chain, err := trust.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	acct, err := chain.Space(space)
	if err != nil {
		b.Fatal(err)
	}
	accounts, err := chain.AccountJWTs()
	if err != nil {
		b.Fatal(err)
	}
	srv := &broker.Server{Dir: b.TempDir(), Port: -1, OperatorJWT: chain.OperatorJWT(), SystemAccount: chain.SystemAccount(), Accounts: accounts}
	if err := srv.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	m := &durableMesh{url: srv.ClientURL(), acct: acct}
	prov := m.connect(b, trust.UserSpec{Name: "op", Profile: trust.ProfileProvisioner, Principal: protocol.Principal{Owner: "local", Actor: "op"}})
	if m.js, err = jetstream.New(prov); err != nil {
		b.Fatal(err)
	}
	if _, err := provision.Space(b.Context(), m.js, space, provision.Options{}); err != nil {
		b.Fatal(err)
	}
	creds, err := acct.Mint(trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery, Principal: protocol.Principal{Owner: "local", Actor: "cotal_delivery"}})
	if err != nil {
		b.Fatal(err)
	}
	lane := &delivery.Lane{Space: space, Server: m.url, Creds: creds, Logger: brokertest.Logger(b)}
	ctx, cancel := context.WithCancel(b.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- lane.Run(ctx, func() { close(ready) }) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		b.Fatalf("delivery daemon: %v", err)
	}
	return m
}

func (m *durableMesh) mint(b *testing.B, spec trust.UserSpec) trust.Creds {
	b.Helper()
	raw, err := m.acct.Mint(spec)
	if err != nil {
		b.Fatal(err)
	}
	c, err := trust.ReadCreds(raw)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func (m *durableMesh) connect(b *testing.B, spec trust.UserSpec) *nats.Conn {
	b.Helper()
	c := m.mint(b, spec)
	nc, err := nats.Connect(m.url, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// agent is the spec of an agent that reads and posts on general.
func (m *durableMesh) agent(b *testing.B, actor string) trust.UserSpec {
	b.Helper()
	p := protocol.Principal{Owner: "local", Actor: actor}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(b.Context(), m.js, space, p, uid, ""); err != nil {
		b.Fatal(err)
	}
	return trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}
}

func (m *durableMesh) endpoint(b *testing.B, spec trust.UserSpec) *client.Endpoint {
	b.Helper()
	c := m.mint(b, spec)
	ep, err := client.Connect(b.Context(), m.url, client.Config{Space: space, Name: spec.Principal.Actor, LifecycleUID: spec.LifecycleUID, Heartbeat: time.Hour},
		nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ep.Close() })
	return ep
}

// fanoutMember is one member of the durable channel as the benchmark reads it: a live
// subscription and its hand-off durable, on one connection, each counting posts.
type fanoutMember struct {
	nc      *nats.Conn
	handoff jetstream.Consumer
	live    atomic.Int64
	durable atomic.Int64
}

// BenchmarkDurableFanout: one poster, a durable channel of 10 members. Each round the
// poster sends 2000 posts; from the first post the round times how long until every
// member has read every post live (the baseline: a core subscription) and how long until
// every member has read (and acked) every post from its hand-off durable, written by the
// delivery daemon. It reports both rates in delivered messages per second and
// durable/live. "post" sends each post with Post, which waits for the broker's stored ack
// as an agent does; "burst" sends them with PublishAsync as fast as the poster can.
func BenchmarkDurableFanout(b *testing.B) {
	m := newDurableMesh(b)
	members := make([]*fanoutMember, fanoutMembers)
	for i := range members {
		spec := m.agent(b, "member"+strconv.Itoa(i))
		ep := m.endpoint(b, spec)
		if err := ep.Join(b.Context(), "general"); err != nil { // the durable join
			b.Fatal(err)
		}
		if ok, why, _ := ep.Backstop("general"); !ok {
			b.Fatalf("member %d: %s", i, why)
		}
		if err := ep.Close(); err != nil {
			b.Fatal(err)
		}
		fm := &fanoutMember{nc: m.connect(b, spec)}
		js, err := jetstream.New(fm.nc)
		if err != nil {
			b.Fatal(err)
		}
		if fm.handoff, err = js.Consumer(b.Context(), protocol.StreamDLV(space), protocol.ConsumerDLV(spec.Principal, spec.LifecycleUID)); err != nil {
			b.Fatal(err)
		}
		sub, err := fm.nc.Subscribe(protocol.ChannelFilter(space, "general"), func(*nats.Msg) { fm.live.Add(1) })
		if err != nil {
			b.Fatal(err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			b.Fatal(err)
		}
		cc, err := fm.handoff.Consume(func(msg jetstream.Msg) {
			if err := msg.Ack(); err != nil {
				b.Error(err)
			}
			fm.durable.Add(1)
		}, jetstream.PullMaxMessages(1000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
		if err := fm.nc.Flush(); err != nil {
			b.Fatal(err)
		}
		members[i] = fm
	}
	alice := m.endpoint(b, m.agent(b, "alice"))

	for _, mode := range []string{"post", "burst"} {
		b.Run(mode, func(b *testing.B) {
			var live, durable time.Duration
			rounds := 0
			for b.Loop() {
				for _, fm := range members {
					fm.live.Store(0)
					fm.durable.Store(0)
				}
				liveDone, durableDone := make(chan time.Duration, 1), make(chan time.Duration, 1)
				start := time.Now()
				go watch(members, func(fm *fanoutMember) int64 { return fm.live.Load() }, start, liveDone)
				go watch(members, func(fm *fanoutMember) int64 { return fm.durable.Load() }, start, durableDone)
				for range fanoutPosts {
					if mode == "post" {
						if _, err := alice.Post(b.Context(), "general", client.Text(text)); err != nil {
							b.Fatal(err)
						}
						continue
					}
					msg := alice.Envelope(client.Text(text))
					msg.Channel = "general"
					if _, err := alice.PublishAsync(protocol.ChatSubject(space, alice.Principal(), "general"), msg); err != nil {
						b.Fatal(err)
					}
				}
				live += wait(b, members, liveDone, "live")
				durable += wait(b, members, durableDone, "durable")
				rounds++
			}
			n := float64(fanoutPosts * fanoutMembers * rounds)
			liveRate, durableRate := n/live.Seconds(), n/durable.Seconds()
			b.ReportMetric(liveRate, "live-msgs/s")
			b.ReportMetric(durableRate, "durable-msgs/s")
			b.ReportMetric(durableRate/liveRate, "durable/live")
		})
	}
}

// watch sends the time from start until every member's count reached fanoutPosts.
func watch(members []*fanoutMember, count func(*fanoutMember) int64, start time.Time, done chan<- time.Duration) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for range tick.C {
		all := true
		for _, fm := range members {
			if count(fm) < fanoutPosts {
				all = false
				break
			}
		}
		if all {
			done <- time.Since(start)
			return
		}
		if time.Now().After(deadline) {
			done <- -1
			return
		}
	}
}

func wait(b *testing.B, members []*fanoutMember, done <-chan time.Duration, what string) time.Duration {
	b.Helper()
	d := <-done
	if d < 0 {
		for i, fm := range members {
			b.Logf("member %d: live %d, durable %d", i, fm.live.Load(), fm.durable.Load())
		}
		b.Fatalf("%s: not every member got every post", what)
	}
	return d
}
