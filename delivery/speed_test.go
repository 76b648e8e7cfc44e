package delivery

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// apiCalls counts the JetStream API requests the daemon holding creds sends on subjects:
// a provisioner's subscription sees every request of the account, and the daemon's are
// those whose reply lies in its own inbox.
func (m *mesh) apiCalls(creds []byte, subjects ...string) *atomic.Int64 {
	m.t.Helper()
	prefix, err := trust.InboxPrefix(creds)
	if err != nil {
		m.t.Fatal(err)
	}
	n := &atomic.Int64{}
	for _, subj := range subjects {
		sub, err := m.prov.Subscribe(subj, func(msg *nats.Msg) {
			if strings.HasPrefix(msg.Reply, prefix+".") {
				n.Add(1)
			}
		})
		if err != nil {
			m.t.Fatal(err)
		}
		m.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := m.prov.Flush(); err != nil {
		m.t.Fatal(err)
	}
	return n
}

// fanoutPassed waits until the fan-out durable acked every post up to seq.
func (m *mesh) fanoutPassed(seq uint64) {
	m.t.Helper()
	fan, err := m.js.Consumer(m.t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		m.t.Fatal(err)
	}
	meshtest.Until(m.t, "every post passed by the fan-out", deadline, func() bool {
		info, err := fan.Info(m.t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= seq
	})
}

// TestBurstSyncsTheViewsOnce: a burst of posts already stored when the daemon starts is
// decided in several rounds, and the views are brought up to their buckets once for it,
// not once per round: the first post delivered says how many were stored before it was
// sent, so the first round's sync covers every later round's posts. Every copy is made.
func TestBurstSyncsTheViewsOnce(t *testing.T) {
	const n = 3000
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	m.setChannel("random", `{"replay":false}`)
	l := m.lane()
	d := serve(t, l)
	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	// Six senders, two on general and four on random, of which bob is no member: CHAT
	// keeps 1000 posts per sender and channel, DLV 1000 copies per member.
	for i, actor := range []string{"alice", "carol", "dave", "erin", "frank", "grace"} {
		ch := "random"
		if i < 2 {
			ch = "general"
		}
		ep := m.endpoint(m.agent(actor, ch))
		for i := range n / 6 {
			msg := ep.Envelope(client.Text(text(i)))
			msg.Channel = ch
			if _, err := ep.PublishAsync(protocol.ChatSubject(space, ep.Principal(), ch), msg); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ep.JetStream().PublishAsyncComplete():
		case <-time.After(deadline):
			t.Fatal("the burst was not stored")
		}
	}
	// The channels bucket is read only by the view: its watch at start and each sync.
	syncs := m.apiCalls(l.Creds, "$JS.API.STREAM.INFO.KV_"+protocol.BucketChannels(space))
	serve(t, l)
	m.fanoutPassed(n)
	if got := m.stored("bob"); got != n/3 {
		t.Fatalf("%d copies made for offline bob, want %d", got, n/3)
	}
	// One at the watch's start, one for the burst's first round, and a round or two
	// whose first post came before the broker's count of those behind it was seen. Before:
	// one per round, more than n/maxGroup.
	t.Logf("the channels bucket's info read %d times", syncs.Load())
	if got := syncs.Load(); got > 4 {
		t.Fatalf("the channels bucket's info was read %d times for a burst of %d posts; want at most 4", got, n)
	}
}

// TestConfirmOfAKnownPositionAsksNothing: a member confirms a position the fan-out was
// already delivered; the daemon takes the row from its members view and the position from
// what it knows stored, so it reads neither CHAT's info nor the row from the bucket, and
// the row holds the position.
func TestConfirmOfAKnownPositionAsksNothing(t *testing.T) {
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	l := m.lane()
	l.PositionGrace = deadline // only a hang guard: bob's position decides
	serve(t, l)
	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := bob.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	members := protocol.BucketMembers(space)
	calls := m.apiCalls(l.Creds, "$JS.API.STREAM.INFO."+protocol.StreamChat(space),
		"$JS.API.DIRECT.GET.KV_"+members, "$JS.API.DIRECT.GET.KV_"+members+".>", "$JS.API.STREAM.MSG.GET.KV_"+members)
	alice := m.endpoint(m.agent("alice", "general"))
	ack, err := alice.Post(t.Context(), "general", client.Text(text(0)))
	if err != nil {
		t.Fatal(err)
	}
	if in := clienttest.Receive(t, bob, deadline); in.Durable || in.Text() != text(0) {
		t.Fatalf("bob shown durable %v %q, want live %q", in.Durable, in.Text(), text(0))
	}
	m.fanoutPassed(ack.Seq) // bob's copy waits for his position: it came
	kv, err := m.js.KeyValue(t.Context(), members)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), protocol.MembershipKey("general", bob.Principal(), m.uid("bob")))
	if err != nil {
		t.Fatal(err)
	}
	row, err := protocol.DecodeMembership(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if row.Position < ack.Seq {
		t.Fatalf("bob's row holds position %d, want at least %d", row.Position, ack.Seq)
	}
	if got := m.stored("bob"); got != 0 {
		t.Fatalf("%d copies made for bob, who read the post live; want 0", got)
	}
	if got := calls.Load(); got != 0 {
		t.Fatalf("the daemon sent %d requests for CHAT's info or a membership row; want 0", got)
	}
}

// TestBurstConfirmedWhenItEnds: carol, who confirms at most once per 40 s period while
// posts keep coming, reads a burst live; she confirms her position once the burst
// pauses (an eighth of the period, and at least a quarter period after her last
// confirmation), not a period after it began, so the fan-out, holding her copies for her
// position, passes the burst within 30 s and makes no copy for her.
func TestBurstConfirmedWhenItEnds(t *testing.T) {
	const n, every = 20, 40 * time.Second
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	l := m.lane()
	l.PositionGrace, l.ReaderTTL = 2*every, 2*every // only hang guards: carol's position decides
	serve(t, l)
	c, err := trust.ReadCreds(m.agent("carol", "general"))
	if err != nil {
		t.Fatal(err)
	}
	carol, err := client.Connect(t.Context(), m.URL, client.Config{Space: space, Name: "carol", LifecycleUID: c.LifecycleUID,
		Heartbeat: time.Hour, PositionEvery: every, Logger: brokertest.Logger(t)},
		nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = carol.Close() })
	if err := carol.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if ok, why, _ := carol.Backstop("general"); !ok {
		t.Fatalf("backstop not established: %s", why)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, n)
	for i := range n {
		if in := clienttest.Receive(t, carol, deadline); in.Durable || in.Text() != text(i) {
			t.Fatalf("carol's message %d: durable %v %q, want live %q", i, in.Durable, in.Text(), text(i))
		}
	}
	fan, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	// Under the period: only the confirmation at the burst's end passes it in time.
	meshtest.Until(t, "the fan-out passed the burst on carol's position", 3*every/4, func() bool {
		info, err := fan.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= n
	})
	if got := m.stored("carol"); got != 0 {
		t.Fatalf("%d copies made for carol, who read every post live; want 0", got)
	}
}
