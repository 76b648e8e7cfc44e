package rundriver

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// TestWaitMessageOnTheManagersGrant: on a mesh that checks credentials, a run driven on
// the manager's own minted credential (profile manager) waits on a channel its admission
// admits and settles with the message posted there. The same credential on a raw
// connection reads no channel directly, touches neither the delivery daemon's fan-out
// durable nor the DM stream, and reads no chat message by sequence.
func TestWaitMessageOnTheManagersGrant(t *testing.T) {
	mesh := meshtest.Start(t, space)
	admin := mesh.Provision(space, provision.Options{DefaultDeliveryClass: "live"})
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}
	const uid = "manager0000000000000000000000"
	if _, err := provision.Agent(t.Context(), admin, space, me, uid, ""); err != nil {
		t.Fatal(err)
	}
	raw := mesh.Mint(space, trust.UserSpec{Name: "manager", Profile: trust.ProfileManager, Principal: me, LifecycleUID: uid})
	mjs, err := jetstream.New(mesh.Connect(raw))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, js: admin}
	f.clock.Store(1_764_720_000_000)
	cfg := f.cfg()
	cfg.JS = mjs

	run := runstore.NewRunID()
	admit(t, admin, run, "build")
	done := f.driveBG(t.Context(), cfg, `const m = await wait(message(channel("build")), { name: "hear", timeout: "1h" }); log(m.parts[0].text);`, run)
	e := f.parked(admin, run, "/wait:hear#0")
	id := post(t, admin, "ann", "build", "green")
	if out := f.finished(done); out.State != runstore.StateCompleted {
		t.Fatalf("the run on the manager's credential ended %s: %v", out.State, out.Err)
	}
	if s, v := f.settledResult(run, "/wait:hear#0"); v["id"] != id {
		t.Fatalf("the wait answered %s", s.Result)
	}
	consumerGone(t, admin, e.RequestID)

	// The attack, on the manager's real credential.
	errs := make(chan error, 8)
	nc := mesh.Connect(raw, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	refused := func(what, want string) {
		t.Helper()
		_ = nc.Flush()
		select {
		case e := <-errs:
			if !strings.Contains(strings.ToLower(e.Error()), want) {
				t.Fatalf("%s: %v", what, e)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the broker did not refuse %s", what)
		}
	}
	if _, err := nc.SubscribeSync(protocol.ChannelFilter(space, "secret")); err != nil {
		t.Fatal(err)
	}
	refused("a plain subscription to a channel", "permissions violation for subscription")
	chat, dm := protocol.StreamChat(space), protocol.StreamDM(space)
	for _, subj := range []string{
		"$JS.API.CONSUMER.DELETE." + chat + "." + protocol.ConsumerFanout,
		"$JS.API.CONSUMER.CREATE." + chat + "." + protocol.ConsumerFanout + "." + protocol.ChatAll(space),
		"$JS.API.CONSUMER.CREATE." + dm + ".wfw_x." + protocol.InstAll(space),
		"$JS.API.STREAM.MSG.GET." + chat,
		"$JS.API.DIRECT.GET." + chat,
		protocol.ChatSubject(space, me, "build"),
	} {
		if err := nc.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		refused(subj, "permissions violation for publish")
	}
}
