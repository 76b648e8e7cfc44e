package bench

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
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
	prov *nats.Conn
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
	m.prov = m.connect(b, trust.UserSpec{Name: "op", Profile: trust.ProfileProvisioner, Principal: protocol.Principal{Owner: "local", Actor: "op"}})
	if m.js, err = jetstream.New(m.prov); err != nil {
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
	deliverytest.Serve(b, lane)
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

// agent is the spec of an agent that reads and posts on general (durable) and lively
// (live class).
func (m *durableMesh) agent(b *testing.B, actor string) trust.UserSpec {
	b.Helper()
	p := protocol.Principal{Owner: "local", Actor: actor}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(b.Context(), m.js, space, p, uid, ""); err != nil {
		b.Fatal(err)
	}
	return trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
		AllowSubscribe: []string{"general", "lively"}, AllowPublish: []string{"general", "lively"}}
}

func (m *durableMesh) endpoint(b *testing.B, spec trust.UserSpec) *client.Endpoint {
	b.Helper()
	c := m.mint(b, spec)
	ep, err := client.Connect(b.Context(), m.url, client.Config{Space: space, Name: spec.Principal.Actor, LifecycleUID: spec.LifecycleUID,
		Heartbeat: time.Hour, InboxSize: 4096}, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ep.Close() })
	return ep
}

// fanoutMember is one member of both channels as the benchmark reads it: an endpoint whose
// application counts each post it is shown once, per channel, and any post shown again.
type fanoutMember struct {
	spec  trust.UserSpec
	ep    *client.Endpoint
	mu    sync.Mutex
	seen  map[string]bool // ids shown
	shown map[string]*atomic.Int64
	dups  atomic.Int64
	quit  chan struct{} // closed to stop read
}

func (fm *fanoutMember) count(ch string) int64 { return fm.shown[ch].Load() }

// read is the member's application: it takes every message, acks durable copies and
// counts what it was shown, until quit closes.
func (fm *fanoutMember) read() {
	for {
		var in *client.Incoming
		select {
		case in = <-fm.ep.Messages():
		case <-fm.quit:
			return
		}
		if in.Durable {
			_ = in.Ack()
		}
		fm.mu.Lock()
		dup := fm.seen[in.ID]
		fm.seen[in.ID] = true
		fm.mu.Unlock()
		if dup {
			fm.dups.Add(1)
			continue
		}
		if c := fm.shown[in.Subject.Channel]; c != nil {
			c.Add(1)
		}
	}
}

// BenchmarkDurableFanout: one poster, 10 members of a durable channel (general) and of a
// live one (lively), each an endpoint whose application takes every message. Each round
// the poster sends 1000 posts to lively (the baseline) and then 1000 to general; a round
// is timed from its first post until every connected member was shown every post once
// (and, with a member offline, until the delivery daemon passed every post, so that
// member's copy of each is stored). It reports the rates in posts shown per second and shown/live: the durable
// channel's cost over live delivery, all members connected and one offline. "post" sends
// each post with Post, which waits for the broker's stored ack as an agent does; "burst"
// sends them with PublishAsync as fast as the poster can. dups counts posts shown twice,
// copies/post the hand-off copies written per durable post (10 before position tracking).
func BenchmarkDurableFanout(b *testing.B) {
	m := newDurableMesh(b)
	kv, err := m.js.KeyValue(b.Context(), protocol.BucketChannels(space))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kv.Put(b.Context(), "lively", []byte(`{"deliveryClass":"live"}`)); err != nil {
		b.Fatal(err)
	}
	members := make([]*fanoutMember, fanoutMembers)
	for i := range members {
		spec := m.agent(b, "member"+strconv.Itoa(i))
		fm := &fanoutMember{spec: spec, ep: m.endpoint(b, spec), seen: map[string]bool{}, quit: make(chan struct{}),
			shown: map[string]*atomic.Int64{"general": {}, "lively": {}}}
		if err := fm.ep.Join(b.Context(), "general", "lively"); err != nil { // general: the durable join
			b.Fatal(err)
		}
		if ok, why, _ := fm.ep.Backstop("general"); !ok {
			b.Fatalf("member %d: %s", i, why)
		}
		go fm.read()
		members[i] = fm
	}
	alice := m.endpoint(b, m.agent(b, "alice"))
	dlv, err := m.js.Stream(b.Context(), protocol.StreamDLV(space))
	if err != nil {
		b.Fatal(err)
	}
	offline := members[0]
	// passed: the fan-out acked the last post sent, so each copy it owed is stored (it
	// acks a round's posts once their copies are, one round after the other). The
	// fan-out's acks are watched as they go to the broker, rather than its durable's info
	// polled, which would load the broker's JetStream API that the members and the daemon
	// use meanwhile. lastSeq is the last post's sequence, or lastFut its future.
	acks := ackWatch(b, m.prov)
	var lastSeq uint64
	var lastFut jetstream.PubAckFuture
	passed := func() bool {
		if lastFut != nil {
			select {
			case pa := <-lastFut.Ok():
				lastSeq, lastFut = pa.Sequence, nil
			default:
				return false
			}
		}
		return acks.top.Load() >= lastSeq
	}
	copies := func() uint64 {
		info, err := dlv.Info(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		return info.State.LastSeq
	}

	for _, c := range []struct {
		name    string
		burst   bool
		offline bool
	}{{"post", false, false}, {"burst", true, false}, {"post-one-offline", false, true}, {"burst-one-offline", true, true}} {
		if c.offline && offline.ep != nil {
			close(offline.quit)
			if err := offline.ep.Close(); err != nil {
				b.Fatal(err)
			}
			offline.ep = nil
		}
		connected := members
		if c.offline {
			connected = members[1:]
		}
		send := func(b *testing.B, ch string) {
			for range fanoutPosts {
				if !c.burst {
					sent, err := alice.Post(b.Context(), ch, client.Text(text))
					if err != nil {
						b.Fatal(err)
					}
					lastSeq = sent.Seq
					continue
				}
				msg := alice.Envelope(client.Text(text))
				msg.Channel = ch
				fut, err := alice.PublishAsync(protocol.ChatSubject(space, alice.Principal(), ch), msg)
				if err != nil {
					b.Fatal(err)
				}
				lastFut = fut
			}
		}
		b.Run(c.name, func(b *testing.B) {
			var live, shown time.Duration
			rounds := 0
			copies0 := copies()
			dups0 := int64(0)
			for _, fm := range members {
				dups0 += fm.dups.Load()
			}
			for b.Loop() {
				for _, ch := range []string{"lively", "general"} {
					base := map[*fanoutMember]int64{}
					for _, fm := range connected {
						base[fm] = fm.count(ch)
					}
					done := func() bool {
						for _, fm := range connected {
							if fm.count(ch)-base[fm] < fanoutPosts {
								return false
							}
						}
						return !c.offline || ch != "general" || passed()
					}
					start := time.Now()
					send(b, ch)
					d := waitFor(b, done, start, ch)
					if ch == "lively" {
						live += d
					} else {
						shown += d
					}
				}
				rounds++
			}
			dups := -dups0
			for _, fm := range members {
				dups += fm.dups.Load()
			}
			n := float64(fanoutPosts * len(connected) * rounds)
			liveRate, shownRate := n/live.Seconds(), n/shown.Seconds()
			b.ReportMetric(liveRate, "live-msgs/s")
			b.ReportMetric(shownRate, "durable-msgs/s")
			b.ReportMetric(shownRate/liveRate, "durable/live")
			b.ReportMetric(float64(dups), "dups")
			b.ReportMetric(float64(copies()-copies0)/float64(fanoutPosts*rounds), "copies/post")
		})
	}
}

// fanoutAcks is what the fan-out durable acked: top is the highest CHAT sequence.
type fanoutAcks struct {
	top atomic.Uint64
}

// ackWatch subscribes, on nc (a provisioner's connection), to the acks sent for the
// fan-out durable's deliveries and follows the highest post they ack.
func ackWatch(b *testing.B, nc *nats.Conn) *fanoutAcks {
	b.Helper()
	a := &fanoutAcks{}
	sub, err := nc.Subscribe("$JS.ACK."+protocol.StreamChat(space)+"."+protocol.ConsumerFanout+".>", func(m *nats.Msg) {
		if len(m.Data) > 0 && string(m.Data) != "+ACK" {
			return // a progress mark, nak or term: not an ack
		}
		seq, ok := ackedSeq(m.Subject)
		if !ok {
			return
		}
		for cur := a.top.Load(); seq > cur && !a.top.CompareAndSwap(cur, seq); cur = a.top.Load() {
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	return a
}

// ackedSeq is the stream sequence an ack subject acks: $JS.ACK.<stream>.<consumer>.
// <delivered>.<stream seq>.<consumer seq>.<time>.<pending>, or the form with a domain and
// an account hash after $JS.ACK and a token at the end.
func ackedSeq(subject string) (uint64, bool) {
	t := strings.Split(subject, ".")
	i := 5
	if len(t) >= 12 {
		i = 7
	}
	if len(t) < 9 {
		return 0, false
	}
	seq, err := strconv.ParseUint(t[i], 10, 64)
	return seq, err == nil
}

// waitFor returns the time from start until done holds, polling every millisecond; it
// fails the benchmark after two minutes.
func waitFor(b *testing.B, done func() bool, start time.Time, what string) time.Duration {
	b.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for range tick.C {
		if done() {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not every member was shown every post", what)
		}
	}
	return 0
}
