package manager_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// TestManagerHostsRunsOnAnAuthenticatedMesh: on a mesh that checks credentials, the
// manager's own minted credential (profile manager, no project keys) drives a run: it
// starts it, parks it at a checkpoint, and completes it once the operator answers. The
// same credential on a raw connection may not write another endpoint's run record nor a
// revocation marker (revoking is the operator's).
func TestManagerHostsRunsOnAnAuthenticatedMesh(t *testing.T) {
	mesh := meshtest.Start(t, space)
	js := mesh.Provision(space, provision.Options{DefaultDeliveryClass: "live"})
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}
	const uid = "manager0000000000000000000000"
	if _, err := provision.Agent(t.Context(), js, space, me, uid, ""); err != nil {
		t.Fatal(err)
	}
	raw := mesh.Mint(space, trust.UserSpec{Name: "manager", Profile: trust.ProfileManager, Principal: me, LifecycleUID: uid})
	creds, err := trust.ReadCreds(raw)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, mesh.URL, client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint, LifecycleUID: creds.LifecycleUID},
				nats.UserJWTAndSeed(creds.JWT, creds.Seed), nats.CustomInboxPrefix(creds.InboxPrefix))
		},
		Project: project(t), Space: space, Servers: mesh.URL, Exe: exe, Host: "testhost", Auth: true,
		Operator: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"},
		Mint:     func(_ context.Context, spec trust.UserSpec) ([]byte, error) { return mesh.Mint(space, spec), nil },
		Logger:   brokertest.Logger(t),
	}
	r := &rig{t: t, m: m, done: make(chan error, 1)}
	r.start()

	run, err := m.StartRun(`const c = await checkpoint("go", "Go on?", { timeout: "1h" });
log("answered " + c.value);`, "")
	if err != nil {
		t.Fatalf("start a run on the manager's own credential: %v", err)
	}
	var token string
	meshtest.Until(t, "the checkpoint waits", 30*time.Second, func() bool {
		recs, _, err := runstore.Replay(t.Context(), js, space, run)
		if err != nil {
			return false
		}
		n := 0
		for _, rec := range recs {
			if rec.Entry != nil && rec.Entry.Key() == "/checkpoint:go#0" && rec.Entry.State == "pending" {
				n++
				token = rundriver.Token(*rec.Entry)
			}
		}
		return n >= 2
	})
	recs, err := runstore.OpenRecords(t.Context(), js, space)
	if err != nil {
		t.Fatal(err)
	}
	id, err := runstore.AnswerID(token, "local.op", "yes", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(t.Context(), runstore.AnswerKey(runstore.DefaultEndpoint, token, id),
		runstore.Answer{V: 1, Token: token, AnswerID: id, Value: json.RawMessage(`"yes"`), By: "local.op", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := m.WaitRun(ctx, run); err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("the hosted run ended %+v, %v; want completed", out, err)
	}

	// The attack: the manager's credential on a raw connection reaches only its own
	// endpoint's records and never a revocation marker.
	errs := make(chan error, 4)
	nc := mesh.Connect(raw, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	for _, subj := range []string{
		"$KV." + provision.BucketRecords(space) + ".run.other." + run + ".status",
		"$KV." + provision.BucketAdmission(space) + "." + runstore.RevocationKey(runstore.DefaultEndpoint, run),
	} {
		if err := nc.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		select {
		case e := <-errs:
			if !strings.Contains(strings.ToLower(e.Error()), "permissions violation for publish") {
				t.Fatalf("%s: %v", subj, e)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the broker did not refuse the manager's publish of %s", subj)
		}
	}
	kv, err := js.KeyValue(t.Context(), provision.BucketAdmission(space))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(t.Context(), runstore.RevocationKey(runstore.DefaultEndpoint, run)); err != jetstream.ErrKeyNotFound {
		t.Fatalf("a revocation marker was written: %v", err)
	}
}

// TestManagerWithoutRunStoresRefusesRuns: a manager whose run store lacks the records
// bucket (a space it may not reach, or one made before runs existed) hosts nothing: it
// refuses a start at once rather than answer a run id it cannot drive.
func TestManagerWithoutRunStoresRefusesRuns(t *testing.T) {
	bare := brokertest.Start(t)
	r := newRig(t, func(m *manager.Manager) {
		m.RunStore = func(context.Context) (jetstream.JetStream, error) { return jetstream.New(dial(t, bare.ClientURL())) }
	})
	if run, err := r.m.StartRun(`await checkpoint("go", "Go?");`, ""); err == nil || !strings.Contains(err.Error(), "hosts no runs") {
		t.Fatalf("start on a manager with no run store: %q, %v; want it refused", run, err)
	}
}
