package provision_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

func TestAgentPrecreatesDurablesOnce(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	bob := protocol.Principal{Owner: "local", Actor: "bob"}
	uid := protocol.NewLifecycleUID()
	// A DM sent before the durable exists is not the new durable's business.
	if _, err := js.Publish(ctx, protocol.InstSubject("main", bob, protocol.Principal{Owner: "local", Actor: "a"}), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Agent(ctx, js, "main", bob, uid, "reviewer")
	want := []string{protocol.ConsumerDM(bob, uid), protocol.ConsumerDLV(bob, uid),
		protocol.ConsumerKVWatch(protocol.KVWatchPresence, bob, uid), protocol.ConsumerKVWatch(protocol.KVWatchChannels, bob, uid),
		"svc_reviewer"}
	if err != nil || !slices.Equal(rep.Created, want) {
		t.Fatalf("first: %+v %v, want created %v", rep, err, want)
	}
	c, err := js.Consumer(ctx, "DM_main", protocol.ConsumerDM(bob, uid))
	if err != nil {
		t.Fatal(err)
	}
	info := c.CachedInfo()
	if info.Config.FilterSubject != protocol.DMFilter("main", bob) || info.Config.AckPolicy != jetstream.AckExplicitPolicy || info.NumPending != 0 {
		t.Fatalf("dm durable: %+v pending %d", info.Config, info.NumPending)
	}
	if _, err := js.Publish(ctx, protocol.InstSubject("main", bob, protocol.Principal{Owner: "local", Actor: "a"}), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	rep, err = provision.Agent(ctx, js, "main", bob, uid, "reviewer")
	if err != nil || !slices.Equal(rep.Existing, want) || len(rep.Created)+len(rep.Updated) != 0 {
		t.Fatalf("second: %+v %v", rep, err)
	}
	if info, _ := c.Info(ctx); info.NumPending != 1 {
		t.Fatalf("the waiting DM was lost: pending %d", info.NumPending)
	}
	if _, err := js.Consumer(ctx, "TASK_main", "svc_reviewer"); err != nil {
		t.Fatal(err)
	}
	for _, k := range protocol.KVWatches {
		w, err := js.PushConsumer(ctx, "KV_"+k.Bucket("main"), protocol.ConsumerKVWatch(k, bob, uid))
		if err != nil {
			t.Fatal(err)
		}
		cfg := w.CachedInfo().Config
		if cfg.DeliverSubject != protocol.KVWatchSubject("main", k, bob, uid) || cfg.FilterSubject != "$KV."+k.Bucket("main")+".>" ||
			cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.DeliverPolicy != jetstream.DeliverLastPerSubjectPolicy {
			t.Fatalf("watcher %s: %+v", k, cfg)
		}
	}
	if _, err := provision.Agent(ctx, js, "main", bob, "short", ""); err == nil {
		t.Fatal("a bad uid was accepted")
	}
}

// TestAgentHandoffDurableIsReferences: mint and spawn create the member's hand-off durable
// with the reference's dlvDurableConfig, so a member binds it before any daemon ran (a
// reference daemon creates none).
func TestAgentHandoffDurableIsReferences(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	bob := protocol.Principal{Owner: "local", Actor: "bob"}
	uid := protocol.NewLifecycleUID()
	if _, err := provision.Agent(ctx, js, "main", bob, uid, ""); err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, "DLV_main", "dlv_local-bob-"+uid)
	if err != nil {
		t.Fatalf("no hand-off durable after mint: %v", err)
	}
	got := c.CachedInfo().Config
	if got.FilterSubject != "cotal.main.dlv.local.bob."+uid || got.AckPolicy != jetstream.AckExplicitPolicy ||
		got.AckWait != 60*time.Second || got.DeliverPolicy != jetstream.DeliverAllPolicy || got.MaxAckPending != 1000 {
		t.Fatalf("hand-off durable %+v", got)
	}
	if _, err := provision.Handoff(ctx, js, "nowhere", bob, uid); err == nil || !strings.Contains(err.Error(), "cotal up --space nowhere") {
		t.Fatalf("hand-off durable on an unprovisioned space: %v", err)
	}
}

// TestTaskQueueAckWaitMigrated: a role durable made by the earlier release (ack wait 30 s)
// is raised to the reference's 60 s in place, by cotal up (Space) and by a mint of the
// role (Agent), keeping the asks waiting in it and the one a holder holds.
func TestTaskQueueAckWaitMigrated(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	old := provision.TaskQueueConfig("main", "reviewer")
	old.AckWait = protocol.AnycastAckWaitGo0
	cons, err := js.CreateConsumer(ctx, "TASK_main", old)
	if err != nil {
		t.Fatal(err)
	}
	other := provision.TaskQueueConfig("main", "writer")
	other.AckWait = 45 * time.Second // not the earlier release's: someone chose it
	if _, err := js.CreateConsumer(ctx, "TASK_main", other); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := js.Publish(ctx, "cotal.main.svc.reviewer.local.alice", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	held, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range held.Messages() {
		n++
	}
	if n != 1 {
		t.Fatalf("took %d asks, want 1: %v", n, held.Error())
	}

	rep, err := provision.Space(ctx, js, "main", provision.Options{})
	if err != nil || !slices.Equal(rep.Updated, []string{"svc_reviewer"}) {
		t.Fatalf("cotal up over a 30 s role durable: %+v %v", rep, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.AckWait != 60*time.Second || info.NumAckPending != 1 || info.NumPending != 1 {
		t.Fatalf("after the migration: ack wait %s, held %d, waiting %d; want 60s, 1, 1", info.Config.AckWait, info.NumAckPending, info.NumPending)
	}
	w, err := js.Consumer(ctx, "TASK_main", "svc_writer")
	if err != nil || w.CachedInfo().Config.AckWait != 45*time.Second {
		t.Fatalf("a role durable of another ack wait was changed: %v", err)
	}

	// A mint of the role migrates too (a space not brought up again since the upgrade).
	old.Durable, old.FilterSubject = "svc_tester", protocol.RoleFilter("main", "tester")
	if _, err := js.CreateConsumer(ctx, "TASK_main", old); err != nil {
		t.Fatal(err)
	}
	rep, err = provision.Agent(ctx, js, "main", protocol.Principal{Owner: "local", Actor: "eve"}, protocol.NewLifecycleUID(), "tester")
	if err != nil || !slices.Contains(rep.Updated, "svc_tester") {
		t.Fatalf("mint over a 30 s role durable: %+v %v", rep, err)
	}
	if c, _ := js.Consumer(ctx, "TASK_main", "svc_tester"); c.CachedInfo().Config.AckWait != 60*time.Second {
		t.Fatalf("svc_tester ack wait %s", c.CachedInfo().Config.AckWait)
	}
}

// TestSpaceAddsInboxOnUpgrade: a space made by the earlier release (no INBOX stream) gains
// the reference's INBOX_<space> at the next cotal up; nothing stored elsewhere changes.
func TestSpaceAddsInboxOnUpgrade(t *testing.T) {
	js := meshtest.JetStream(t)
	ctx := t.Context()
	if _, err := provision.Space(ctx, js, "main", provision.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, "INBOX_main"); err != nil { // as the earlier release left it
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "cotal.main.dlv.local.bob."+protocol.NewLifecycleUID(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Space(ctx, js, "main", provision.Options{})
	if err != nil || !slices.Equal(rep.Created, []string{"INBOX_main"}) || len(rep.Updated) != 0 {
		t.Fatalf("upgrade: %+v %v, want only INBOX_main created", rep, err)
	}
	c := streamConfig(t, js, "INBOX_main")
	if !slices.Equal(c.Subjects, []string{"cotal.main.dinbox.>"}) || c.MaxMsgsPerSubject != 1000 || c.Duplicates != 2*time.Hour ||
		c.Retention != jetstream.LimitsPolicy || c.AllowDirect || c.Discard != jetstream.DiscardOld {
		t.Fatalf("INBOX_main %+v", c)
	}
	if st, _ := js.Stream(ctx, "DLV_main"); st.CachedInfo().State.Msgs != 1 {
		t.Fatal("a stored hand-off copy was lost")
	}
}
