package delivery

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// fanoutInfo reads the fan-out durable.
func (m *mesh) fanoutInfo() *jetstream.ConsumerInfo {
	m.t.Helper()
	c, err := m.js.Consumer(m.t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
	if err != nil {
		m.t.Fatalf("fan-out durable: %v", err)
	}
	info, err := c.Info(m.t.Context())
	if err != nil {
		m.t.Fatalf("fan-out durable info: %v", err)
	}
	return info
}

// chatLast is CHAT's last sequence.
func (m *mesh) chatLast() uint64 {
	m.t.Helper()
	s, err := m.js.Stream(m.t.Context(), protocol.StreamChat(space))
	if err != nil {
		m.t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// TestFanoutDurableIsTheReferences: a daemon on a fresh space creates the fan-out durable
// as the reference's fanoutDurableConfig (explicit acks, deliver new) and acks every post
// once its copies are stored, so the ack floor reaches the last post.
func TestFanoutDurableIsTheReferences(t *testing.T) {
	m := newMesh(t, 0)
	alice := m.endpoint(m.agent("alice", "general"))
	if _, err := alice.Post(t.Context(), "general", client.Text("before any daemon")); err != nil {
		t.Fatal(err)
	}
	serve(t, m.lane())
	meshtest.Until(t, "the fan-out durable created", deadline, func() bool {
		_, err := m.js.Consumer(t.Context(), protocol.StreamChat(space), protocol.ConsumerFanout)
		return err == nil
	})
	cfg := m.fanoutInfo().Config
	if cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.DeliverPolicy != jetstream.DeliverNewPolicy || cfg.OptStartSeq != 0 ||
		cfg.FilterSubject != protocol.ChatAll(space) || cfg.AckWait != 2*time.Second || cfg.MaxAckPending != 1000 {
		t.Fatalf("fan-out durable %+v, want explicit acks, deliver new, filter %s, ack wait 2s, max ack pending the default 1000",
			cfg, protocol.ChatAll(space))
	}
	bob := m.endpoint(m.agent("bob", "general"))
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	postTexts(t, alice, 0, 5)
	last := m.chatLast()
	meshtest.Until(t, "every post acked", deadline, func() bool {
		info := m.fanoutInfo()
		return info.AckFloor.Stream == last && info.NumAckPending == 0
	})
	if n := m.stored("bob"); n != 5 {
		t.Fatalf("DLV holds %d copies for bob, want 5", n)
	}
}

// TestFanoutMigratesAckAllDurable: the earlier release's fan-out durable (acks-all, from a
// start sequence) is recreated with explicit acks right after its ack floor, so posts
// stored while no daemon ran are copied once and nothing before the floor is copied again.
func TestFanoutMigratesAckAllDurable(t *testing.T) {
	m := newMesh(t, 0)
	m.setChannel("general", `{"replay":false}`)
	d := serve(t, m.lane())
	bobCreds := m.agent("bob", "general")
	bob := m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general"))
	postTexts(t, alice, 0, 5)
	meshtest.Until(t, "five copies stored", deadline, func() bool { return m.stored("bob") == 5 })
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	// Put back the durable the earlier release kept: acks-all, its floor at the last post.
	floor := m.chatLast()
	chat := protocol.StreamChat(space)
	if err := m.js.DeleteConsumer(t.Context(), chat, protocol.ConsumerFanout); err != nil {
		t.Fatal(err)
	}
	if _, err := m.js.CreateConsumer(t.Context(), chat, jetstream.ConsumerConfig{
		Durable: protocol.ConsumerFanout, FilterSubject: protocol.ChatAll(space), AckPolicy: jetstream.AckAllPolicy,
		AckWait: 30 * time.Second, MaxAckPending: 4096, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: floor + 1,
	}); err != nil {
		t.Fatal(err)
	}
	postTexts(t, alice, 5, 10) // stored while no daemon runs
	serve(t, m.lane())
	meshtest.Until(t, "the fan-out durable migrated", deadline, func() bool {
		c, err := m.js.Consumer(t.Context(), chat, protocol.ConsumerFanout)
		return err == nil && c.CachedInfo().Config.AckPolicy == jetstream.AckExplicitPolicy
	})
	cfg := m.fanoutInfo().Config
	if cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy || cfg.OptStartSeq != floor+1 {
		t.Fatalf("migrated fan-out durable %+v, want explicit acks from post %d", cfg, floor+1)
	}
	last := m.chatLast()
	meshtest.Until(t, "every post acked after the migration", deadline, func() bool {
		info := m.fanoutInfo()
		return info.AckFloor.Stream == last && info.NumAckPending == 0
	})
	if n := m.stored("bob"); n != 10 {
		t.Fatalf("DLV holds %d copies for bob, want 10", n)
	}
	bob = m.endpoint(bobCreds)
	if err := bob.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		in := clienttest.Receive(t, bob, deadline)
		if in.Text() != text(i) {
			t.Fatalf("message %d: %q, want %q", i, in.Text(), text(i))
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	}
}
