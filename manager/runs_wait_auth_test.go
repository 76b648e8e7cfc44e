package manager_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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

// TestManagerHostsAChannelWait: on a mesh that checks credentials, a run the manager
// hosts on its own minted credential waits on a channel once an admission admits it (the
// operator writes it while the run waits at a checkpoint) and completes with the message
// posted there; the wait's consumer is gone afterwards.
func TestManagerHostsAChannelWait(t *testing.T) {
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

	run, err := m.StartRun(`await checkpoint("admitted", "Admitted?", { timeout: "1h" });
const msg = await wait(message(channel("build")), { name: "hear", timeout: "1h" });
log("heard " + msg.parts[0].text);`, "")
	if err != nil {
		t.Fatal(err)
	}
	// pendingExt answers the latest pending entry of key once its external is bound.
	pendingExt := func(key string) (runstore.Entry, bool) {
		recs, _, err := runstore.Replay(t.Context(), js, space, run)
		if err != nil {
			return runstore.Entry{}, false
		}
		var last *runstore.Entry
		for _, rec := range recs {
			if rec.Entry != nil && rec.Entry.Key() == key {
				last = rec.Entry
			}
		}
		if last == nil || last.State != "pending" || len(last.External) == 0 {
			return runstore.Entry{}, false
		}
		return *last, true
	}
	var cp runstore.Entry
	meshtest.Until(t, "the checkpoint waits", 30*time.Second, func() (ok bool) { cp, ok = pendingExt("/checkpoint:admitted#0"); return })

	// The operator admits the run to read build, then answers the checkpoint.
	adm, err := runstore.OpenAdmissions(t.Context(), js, space)
	if err != nil {
		t.Fatal(err)
	}
	caller := runstore.Caller{Owner: protocol.OwnerLocal, Actor: "op", UID: "u_00000000000000000000"}
	if err := adm.Admit(t.Context(), runstore.Admission{Version: 1, Space: space, Endpoint: runstore.DefaultEndpoint, RunID: run,
		InstanceID: strings.Repeat("i", 26), Caller: caller,
		Ceiling: runstore.Ceiling{Publish: runstore.ChannelAllow(nil, nil),
			Subscribe: runstore.ChannelAllow([]string{"build"}, func(ch string) string { return protocol.ChannelFilter(space, ch) })},
		Provenance: runstore.Provenance{Kind: "operator", By: "op", Reason: "test"}, AdmittedAt: 1}); err != nil {
		t.Fatal(err)
	}
	recs, err := runstore.OpenRecords(t.Context(), js, space)
	if err != nil {
		t.Fatal(err)
	}
	token := rundriver.Token(cp)
	id, err := runstore.AnswerID(token, "local.op", true, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(t.Context(), runstore.AnswerKey(runstore.DefaultEndpoint, token, id),
		runstore.Answer{V: 1, Token: token, AnswerID: id, Value: json.RawMessage(`true`), By: "local.op", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}

	var w runstore.Entry
	meshtest.Until(t, "the wait holds its position", 30*time.Second, func() (ok bool) { w, ok = pendingExt("/wait:hear#0"); return })
	msg := protocol.Message{ID: "m-1", TS: 1, Space: space, From: protocol.EndpointRef{ID: strings.Repeat("x", 26), Name: "ann"},
		Channel: "build", Parts: []protocol.Part{{Kind: protocol.PartText, Text: "green"}}}
	b, _ := json.Marshal(msg)
	if _, err := js.Publish(t.Context(), protocol.ChatSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ann"}, "build"), b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := m.WaitRun(ctx, run); err != nil || out.State != runstore.StateCompleted {
		t.Fatalf("the hosted run ended %+v, %v; want completed", out, err)
	}
	if _, err := js.Consumer(t.Context(), protocol.StreamChat(space), "wfw_"+w.RequestID); err == nil {
		t.Fatal("the wait's consumer is still there")
	}
}
