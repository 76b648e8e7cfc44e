package rundriver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/trust"
)

// On a mesh that checks credentials, a run driven on the manager's own minted credential
// (as a hosted run is) opens a conclave of two connected agents, resolved through the
// presence they publish: while the room is open a post one member makes on its channel
// is copied by the delivery daemon to the other's hand-off and surfaces in the other's
// endpoint (connected and joined before the room opened, never reconnected), and the
// close releases both, so a later post there is not copied to the other.
// The agent's own credential may not write a membership row: only the daemon and the
// run host do.
func TestConclaveOnAnAuthenticatedMesh(t *testing.T) {
	const sp = "wfmesh"
	mesh := meshtest.Start(t, sp)
	js := mesh.Provision(sp, provision.Options{})
	lane := deliverytest.Lane(t, mesh, sp)
	lane.AckWait = 2 * time.Second
	deliverytest.Serve(t, lane)
	acl, err := js.KeyValue(t.Context(), protocol.BucketACL(sp))
	if err != nil {
		t.Fatal(err)
	}
	type agent struct {
		ep    *client.Endpoint
		p     protocol.Principal
		uid   string
		creds []byte
	}
	connect := func(actor string) agent {
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		uid := (actor + strings.Repeat("0", 26))[:26]
		if _, err := provision.Agent(t.Context(), js, sp, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		raw := mesh.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
			AllowSubscribe: []string{">"}, AllowPublish: []string{">"}})
		if err := delivery.CommitACL(t.Context(), acl, p, uid, []string{">"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(raw)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := client.Connect(t.Context(), mesh.URL, client.Config{Space: sp, Name: actor, LifecycleUID: uid, Logger: brokertest.Logger(t)},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		if err := ep.Join(t.Context()); err != nil { // its presence: what a conclave resolves
			t.Fatal(err)
		}
		return agent{ep: ep, p: p, uid: uid, creds: raw}
	}
	alice, bob := connect("alice"), connect("bob")

	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "manager"}
	const muid = "manager0000000000000000000"
	if _, err := provision.Agent(t.Context(), js, sp, me, muid, ""); err != nil {
		t.Fatal(err)
	}
	mgr, err := jetstream.New(mesh.Connect(mesh.Mint(sp, trust.UserSpec{Name: "manager", Profile: trust.ProfileManager, Principal: me, LifecycleUID: muid})))
	if err != nil {
		t.Fatal(err)
	}
	prog, run, err := Prepare(`const a = { agent: "alice", persona: "dev" };
const b = { agent: "bob", persona: "dev" };
const r = await conclave([a, b], async (room) => { await checkpoint("talk", "Done talking?", { timeout: "1h" }); return room.channel; }, { name: "pair" });
log("room " + r);`)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	cfg := Config{JS: mgr, Space: sp, Logger: brokertest.Logger(t), Log: func(_, line string) { logs = append(logs, line) }}
	done := make(chan Outcome, 1)
	go func() {
		out, err := Start(t.Context(), cfg, prog, run, "")
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	var token, channel string
	meshtest.Until(t, "the room is open and its body waits", 30*time.Second, func() bool {
		select {
		case out := <-done:
			t.Fatalf("the run ended early: %+v", out)
		default:
		}
		recs, _, err := runstore.Replay(t.Context(), js, sp, run)
		if err != nil {
			return false
		}
		bound := 0
		for _, r := range recs {
			if r.Entry == nil || r.Entry.State != "pending" {
				continue
			}
			switch r.Entry.Key() {
			case "/conclave:pair#0":
				var plan conclavePlan
				if json.Unmarshal(r.Entry.External, &plan) == nil && plan.Channel != "" {
					channel = plan.Channel
				}
			case "/conclave:pair#0/b:in/checkpoint:talk#0":
				bound++
				token = Token(*r.Entry)
			}
		}
		return channel != "" && bound >= 2
	})
	if _, err := bob.ep.Post(t.Context(), channel, client.Draft{Parts: []protocol.Part{protocol.TextPart("hello from bob")}}); err != nil {
		t.Fatal(err)
	}
	dlv, err := js.Stream(t.Context(), protocol.StreamDLV(sp))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the daemon copies bob's post to alice's hand-off", 30*time.Second, func() bool {
		m, err := dlv.GetLastMsgForSubject(t.Context(), protocol.DLVSubject(sp, alice.p, alice.uid))
		return err == nil && strings.Contains(string(m.Data), "hello from bob")
	})
	// Alice, connected and joined before the room opened and never reconnected, reads the
	// copy through her ordinary receive path while the room is open.
	select {
	case in := <-alice.ep.Messages():
		if in.Subject.Channel != channel || len(in.Parts) != 1 || in.Parts[0].Text != "hello from bob" || !in.Durable {
			t.Fatalf("alice received %+v; want bob's post on %s as a hand-off copy", in, channel)
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("alice's live endpoint did not receive bob's post while the room was open")
	}

	recs, err := runstore.OpenRecords(t.Context(), js, sp)
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
	select {
	case out := <-done:
		if out.State != runstore.StateCompleted {
			t.Fatalf("run %+v", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the run did not end")
	}
	members := membersBucket{js: js, bucket: protocol.BucketMembers(sp)}
	for _, a := range []agent{alice, bob} {
		r, _, err := readMembership(t.Context(), members, protocol.MembershipKey(channel, a.p, a.uid))
		if err != nil || r == nil || r.Active() {
			t.Fatalf("%s's row after the close: %+v %v; want left", a.p, r, err)
		}
	}
	if len(logs) != 1 || logs[0] != "room "+channel {
		t.Fatalf("logged %v", logs)
	}

	// After the close a further post on the channel reaches alice no more: once the
	// daemon's fan-out has passed it, her hand-off holds no copy of it and her endpoint
	// surfaced nothing.
	later, err := bob.ep.Post(t.Context(), channel, client.Draft{Parts: []protocol.Part{protocol.TextPart("after the close")}})
	if err != nil {
		t.Fatal(err)
	}
	fan, err := js.Consumer(t.Context(), protocol.StreamChat(sp), protocol.ConsumerFanout)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the daemon's fan-out passes the post after the close", 30*time.Second, func() bool {
		info, err := fan.Info(t.Context())
		return err == nil && info.AckFloor.Stream >= later.Seq
	})
	if m, err := dlv.GetLastMsgForSubject(t.Context(), protocol.DLVSubject(sp, alice.p, alice.uid)); err != nil || strings.Contains(string(m.Data), "after the close") {
		t.Fatalf("alice's hand-off after the close: %v; want no copy of the later post", err)
	}
	select {
	case in := <-alice.ep.Messages():
		t.Fatalf("alice received %+v after the close", in)
	default:
	}

	// The attack: an agent's own credential writes no membership row, not even its own.
	errs := make(chan error, 1)
	nc := mesh.Connect(alice.creds, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	subj := "$KV." + protocol.BucketMembers(sp) + "." + protocol.MembershipKey(channel, alice.p, alice.uid)
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
		t.Fatalf("the broker did not refuse the agent's publish of %s", subj)
	}
}
