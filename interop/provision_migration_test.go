package interop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// earlierSpace provisions the space with the shapes of the release before the reference's
// (provision/resources.go and delivery/fanout.go as they were): buckets made by nats.go's
// KV API (deletes denied), DLV keeping 10000 per member, the auth bucket without
// per-message TTLs.
func earlierSpace(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx := t.Context()
	base := func(name, subject string) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			Replicas: 1, MaxConsumers: -1, MaxMsgs: -1, MaxBytes: -1, MaxMsgsPerSubject: -1, Discard: jetstream.DiscardOld, Duplicates: 2 * time.Minute}
	}
	chat := base("CHAT_"+space, "cotal."+space+".chat.>")
	chat.MaxMsgsPerSubject, chat.AllowDirect = 1000, true
	task := base("TASK_"+space, "cotal."+space+".svc.>")
	task.Retention = jetstream.WorkQueuePolicy
	dlv := base("DLV_"+space, "cotal."+space+".dlv.>")
	dlv.MaxMsgsPerSubject, dlv.Duplicates = 10000, 2*time.Hour
	kvStream := func(bucket string, ttl time.Duration) jetstream.StreamConfig {
		c := base("KV_"+bucket, "$KV."+bucket+".>")
		c.MaxMsgsPerSubject, c.MaxMsgSize, c.Discard, c.AllowRollup, c.DenyDelete, c.AllowDirect = 1, -1, jetstream.DiscardNew, true, true, true
		if ttl > 0 {
			c.MaxAge, c.Duplicates = ttl, ttl
		}
		return c
	}
	presence := kvStream(protocol.BucketPresence(space), protocol.LivenessWindow)
	presence.AllowRollup = false
	auth := kvStream(provision.BucketAuth(space), 0)
	auth.AllowDirect = false
	for _, c := range []jetstream.StreamConfig{chat, base("DM_"+space, "cotal."+space+".inst.>"), task, presence, dlv, auth} {
		if _, err := js.CreateStream(ctx, c); err != nil {
			t.Fatalf("create %s: %v", c.Name, err)
		}
	}
	for _, kv := range []jetstream.KeyValueConfig{
		{Bucket: protocol.BucketChannels(space), History: 1, Storage: jetstream.FileStorage, Replicas: 1},
		{Bucket: protocol.BucketDelivery(space), History: 1, TTL: 30 * time.Second, Storage: jetstream.FileStorage, Replicas: 1},
		{Bucket: protocol.BucketMembers(space), History: 1, Storage: jetstream.FileStorage, Replicas: 1},
		{Bucket: protocol.BucketACL(space), History: 1, Storage: jetstream.FileStorage, Replicas: 1},
	} {
		if _, err := js.CreateKeyValue(ctx, kv); err != nil {
			t.Fatalf("create bucket %s: %v", kv.Bucket, err)
		}
	}
	channels, err := js.KeyValue(ctx, protocol.BucketChannels(space))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := channels.Put(ctx, protocol.ChannelDefaultsKey, []byte(`{"deliveryClass":"durable"}`)); err != nil {
		t.Fatal(err)
	}
}

// chatPost stores a post from local.alice on general, as any peer writes it.
func chatPost(t *testing.T, js jetstream.JetStream, id, text string) uint64 {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"ts":1700000000000,"space":%q,"from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":%q}]}`, id, space, text)
	ack, err := js.Publish(t.Context(), "cotal."+space+".chat.local.alice.general", []byte(body), jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// TestEarlierGoSpaceUpgrades: a space provisioned and served by the earlier release
// (acks-all fan-out durable at its ack floor, DLV at 10000, deny-delete buckets, auth
// bucket without TTLs) holding posts, unread copies in the earlier frame and a membership
// is upgraded in place by provision.Space and the daemon: no stored message and no
// membership lost, the posts stored while no daemon ran and a post after the upgrade each
// delivered once.
func TestEarlierGoSpaceUpgrades(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provisioner(space)
	ctx := t.Context()
	earlierSpace(t, js)
	uid := protocol.NewLifecycleUID()
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	put := func(bucket, key, value string) {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	put(protocol.BucketACL(space), protocol.MemberKey(bob, uid), `{"principal":"local.bob","lifecycleUid":"`+uid+
		`","name":"bob","userKey":"UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","subAllow":["cotal.team.chat.*.*.general","_INBOX_x.>"],"issuedAt":1,"updatedAt":1000}`)
	put(protocol.BucketMembers(space), "general/"+protocol.MemberKey(bob, uid), `{"channel":"general","principal":"local.bob","lifecycleUid":"`+uid+
		`","state":"durable-active","joinCursor":0,"generation":1,"writerIdentity":"0123456789abcdef","updatedAt":1000}`)
	if _, err := js.CreateConsumer(ctx, protocol.StreamDLV(space), jetstream.ConsumerConfig{Durable: protocol.ConsumerDLV(bob, uid),
		FilterSubject: protocol.DLVSubject(space, bob, uid), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1000}); err != nil {
		t.Fatal(err)
	}
	// Two posts the earlier daemon fanned out (their copies unread, in its frame), and its
	// acks-all durable with its floor at the second.
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("p%d", i)
		seq := chatPost(t, js, id, "before the upgrade "+id)
		old := nats.NewMsg(protocol.DLVSubject(space, bob, uid))
		old.Header.Set("Cotal-Frame", "1")
		old.Header.Set("Cotal-Subject", "cotal.team.chat.local.alice.general")
		old.Header.Set("Cotal-Seq", fmt.Sprint(seq))
		old.Header.Set("Cotal-Reason", "durable-channel")
		old.Header.Set("Nats-Msg-Id", id+":local.bob."+uid+":1")
		old.Data = []byte(fmt.Sprintf(`{"id":%q,"ts":1,"space":"team","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"before the upgrade %s"}]}`, id, id))
		if _, err := js.PublishMsg(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	chat := protocol.StreamChat(space)
	if _, err := js.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{Durable: protocol.ConsumerFanout, FilterSubject: protocol.ChatAll(space),
		AckPolicy: jetstream.AckAllPolicy, AckWait: 30 * time.Second, MaxAckPending: 4096,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 3}); err != nil {
		t.Fatal(err)
	}
	// Two posts stored while no daemon ran: after the floor, not yet copied.
	chatPost(t, js, "p3", "while no daemon ran p3")
	chatPost(t, js, "p4", "while no daemon ran p4")
	// A role durable with the earlier ack wait (30 s) and an ask waiting in it.
	role := provision.TaskQueueConfig(space, "reviewer")
	role.AckWait = protocol.AnycastAckWaitGo0
	if _, err := js.CreateConsumer(ctx, protocol.StreamTask(space), role); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "cotal."+space+".svc.reviewer.local.alice", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	rep, err := provision.Space(ctx, js, space, provision.Options{})
	if err != nil {
		t.Fatalf("provision.Space over the earlier space: %v", err)
	}
	for _, name := range []string{"DLV_" + space, provision.BucketAuth(space), "svc_reviewer"} {
		if !slices.Contains(rep.Updated, name) {
			t.Errorf("report %+v: %s not updated", rep, name)
		}
	}
	if !slices.Contains(rep.Created, protocol.StreamInbox(space)) {
		t.Errorf("report %+v: the reference's INBOX stream not created", rep)
	}
	if c, err := js.Consumer(ctx, protocol.StreamTask(space), "svc_reviewer"); err != nil || c.CachedInfo().Config.AckWait != time.Minute || c.CachedInfo().NumPending != 1 {
		t.Errorf("svc_reviewer after the upgrade: %v, want ack wait 60s and the waiting ask kept", err)
	}
	if len(rep.Notes) != 6 || !strings.Contains(strings.Join(rep.Notes, "\n"), "bucket cotal_members_team: deny delete true, want false kept") {
		t.Errorf("notes %q, want the six deny-delete buckets kept", rep.Notes)
	}
	dlvCfg, err := js.Stream(ctx, protocol.StreamDLV(space))
	if err != nil || dlvCfg.CachedInfo().Config.MaxMsgsPerSubject != 1000 || dlvCfg.CachedInfo().State.Msgs != 2 {
		t.Fatalf("DLV after the upgrade: %v, want 1000 per member and both copies kept", err)
	}
	runLane(t, m)

	alice := connect(t, m, member(t, m, js, "alice", protocol.NewLifecycleUID()))
	if _, err := alice.Post(ctx, "general", client.Text("after the upgrade")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the copies of the posts made since the floor", deadline, func() bool { return storedFor(t, js, "bob", uid) == 5 })
	ep := connect(t, m, member(t, m, js, "bob", uid))
	if err := ep.JoinChannel(ctx, "general"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"before the upgrade p1": 0, "before the upgrade p2": 0, "while no daemon ran p3": 0, "while no daemon ran p4": 0, "after the upgrade": 0}
	for range want {
		select {
		case in := <-ep.Messages():
			if _, ok := want[in.Message.Text()]; !ok {
				t.Fatalf("unexpected %q", in.Message.Text())
			}
			want[in.Message.Text()]++
			_ = in.Ack()
		case <-time.After(deadline):
			t.Fatalf("bob got %v", want)
		}
	}
	for text, n := range want {
		if n != 1 {
			t.Errorf("%q delivered %d times, want once", text, n)
		}
	}
	// Exactly once where it is stored: five copies, all read, none left.
	if n := storedFor(t, js, "bob", uid); n != 5 {
		t.Errorf("DLV holds %d copies for bob, want 5", n)
	}
	hand, err := js.Consumer(ctx, protocol.StreamDLV(space), protocol.ConsumerDLV(bob, uid))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's hand-off drained", deadline, func() bool {
		info, err := hand.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	list, err := ep.Memberships(ctx)
	if err != nil || len(list) != 1 || list[0].Channel != "general" || list[0].Generation != 1 {
		t.Fatalf("the earlier membership: %+v, %v", list, err)
	}
	f, err := js.Consumer(ctx, chat, protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.CachedInfo().Config; c.AckPolicy != jetstream.AckExplicitPolicy || c.OptStartSeq != 3 {
		t.Fatalf("fan-out durable after the upgrade %+v, want explicit acks from post 3", c)
	}
	s, err := js.Stream(ctx, chat)
	if err != nil || s.CachedInfo().State.Msgs != 5 {
		t.Fatalf("CHAT after the upgrade: %v, want all 5 posts", err)
	}
}
