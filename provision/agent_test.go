package provision_test

import (
	"testing"

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
	if err != nil || len(rep.Created) != 4 { // DM, the two public-bucket watchers, svc_<role>
		t.Fatalf("first: %+v %v", rep, err)
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
	if err != nil || len(rep.Existing) != 4 || len(rep.Created) != 0 {
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
