package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// TestMembershipWrittenByAnotherPartyReachesALiveMember: alice joins the space (no
// channel, so no durable join of her own, and her hand-off durable is empty), then another
// party (as a workflow conclave's run host does) writes her durable membership row on
// "room". Bob's next post there reaches her connected endpoint through Messages() as a
// hand-off copy, with no reconnect; the copy stays unacked until she acks it.
func TestMembershipWrittenByAnotherPartyReachesALiveMember(t *testing.T) {
	const sp = "team"
	m := meshtest.Start(t, sp)
	js := m.Provision(sp, provision.Options{})
	serveDelivery(t, m, sp)
	acl, err := js.KeyValue(t.Context(), protocol.BucketACL(sp))
	if err != nil {
		t.Fatal(err)
	}
	type agent struct {
		ep  *client.Endpoint
		p   protocol.Principal
		uid string
	}
	connect := func(actor string) agent {
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		uid := protocol.NewLifecycleUID()
		if _, err := provision.Agent(t.Context(), js, sp, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		if err := delivery.CommitACL(t.Context(), acl, p, uid, []string{"room"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(m.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
			AllowSubscribe: []string{"room"}, AllowPublish: []string{"room"}}))
		if err != nil {
			t.Fatal(err)
		}
		ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: sp, Name: actor, LifecycleUID: uid, Logger: brokertest.Logger(t)},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		within(t, actor+"'s join", func() error { return ep.Join(t.Context()) })
		return agent{ep: ep, p: p, uid: uid}
	}
	alice, bob := connect("alice"), connect("bob")

	// The other party's row: durable-active from CHAT's last sequence, as a conclave writes it.
	chat, err := js.Stream(t.Context(), protocol.StreamChat(sp))
	if err != nil {
		t.Fatal(err)
	}
	activated := true
	row, err := json.Marshal(protocol.Membership{Channel: "room", Owner: alice.p.String(), UID: alice.uid, State: protocol.MembershipActive,
		JoinCursor: chat.CachedInfo().State.LastSeq, Activated: &activated, Generation: 1, Writer: "local.wf_000000000000",
		UpdatedAt: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	members, err := js.KeyValue(t.Context(), protocol.BucketMembers(sp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.Put(t.Context(), protocol.MembershipKey("room", alice.p, alice.uid), row); err != nil {
		t.Fatal(err)
	}

	// The daemon may not see the row before bob's first post: post until a copy lands.
	dlv, err := js.Stream(t.Context(), protocol.StreamDLV(sp))
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.DLVSubject(sp, alice.p, alice.uid)
	meshtest.Until(t, "the daemon copies a post of bob's to alice's hand-off", hangGuard, func() bool {
		if _, err := bob.ep.Post(t.Context(), "room", client.Text("hello")); err != nil {
			t.Fatal(err)
		}
		_, err := dlv.GetLastMsgForSubject(t.Context(), subject)
		return err == nil
	})
	var in *client.Incoming
	select {
	case in = <-alice.ep.Messages():
	case <-time.After(hangGuard):
		t.Fatal("alice's connected endpoint did not receive the copy the other party's row made")
	}
	if in.Subject.Channel != "room" || in.Subject.Sender != bob.p || !in.Durable || in.Seq == 0 {
		t.Fatalf("alice received %+v; want bob's post on room as a hand-off copy", in)
	}
	// Nothing is acked before alice has it: the copy waits for her Ack.
	cons, err := js.Consumer(t.Context(), protocol.StreamDLV(sp), protocol.ConsumerDLV(alice.p, alice.uid))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(t.Context()); err != nil || info.NumAckPending == 0 || info.AckFloor.Stream != 0 {
		t.Fatalf("alice's hand-off before her ack: %+v %v; want the copy pending its ack", info, err)
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}
}
