package client_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// routeMesh is an operator-mode mesh with bob, an agent reading only his DMs whose
// drops are logged to bobLog, and alice, an agent that may read and post general. js is
// the provisioner's.
type routeMesh struct {
	m          *meshtest.Mesh
	js         jetstream.JetStream
	bob, alice *client.Endpoint
	bobLog     *syncBuffer
	aliceUID   string
	bobUID     string
}

func newRouteMesh(t *testing.T) *routeMesh {
	t.Helper()
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{DefaultDeliveryClass: "live"})
	bobP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	bobUID := "bbbbbbbbbbbbbbbbbbbbbbbbbb"
	if _, err := provision.Agent(t.Context(), js, space, bobP, bobUID, ""); err != nil {
		t.Fatal(err)
	}
	bobLog := &syncBuffer{}
	bnc := m.Connect(m.Mint(space, trust.UserSpec{Name: "bob", Profile: trust.ProfileAgent, Principal: bobP, LifecycleUID: bobUID}))
	bob, err := client.New(bnc, client.Config{Space: space, Name: "bob", LifecycleUID: bobUID,
		Logger: slog.New(slog.NewTextHandler(bobLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close() })
	if err := bob.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	aliceUID := "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	alice, _ := credPeer(t, m, js, trust.ProfileAgent, "alice", aliceUID)
	return &routeMesh{m: m, js: js, bob: bob, alice: alice, bobLog: bobLog, aliceUID: aliceUID, bobUID: bobUID}
}

// realDMFirstAndOnly has alice send bob a real DM and checks it is the first thing bob
// surfaces, and that nothing follows it: not in Messages(), not on his DM durable.
func (r *routeMesh) realDMFirstAndOnly(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	bobP := r.bob.Principal()
	sent, err := r.alice.DM(ctx, bobP, client.Text("a real DM"))
	if err != nil {
		t.Fatal(err)
	}
	in := next(t, r.bob)
	if in.ID != sent.ID {
		t.Fatalf("bob surfaced %q (%s, channel %q, %q) before alice's real DM %q", in.ID, in.Kind, in.Channel, in.Text(), sent.ID)
	}
	if in.Kind != protocol.DeliveryDM || in.To != bobP.String() || in.Channel != "" {
		t.Fatalf("bob's DM came as kind %s to %q channel %q", in.Kind, in.To, in.Channel)
	}
	dm, err := r.js.Consumer(ctx, protocol.StreamDM(space), protocol.ConsumerDM(bobP, r.bobUID))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's DM durable settled", hangGuard, func() bool {
		info, err := dm.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	})
	select {
	case extra := <-r.bob.Messages():
		t.Fatalf("bob surfaced %q (%s, channel %q, %q) after the real DM", extra.ID, extra.Kind, extra.Channel, extra.Text())
	default:
	}
}

// An agent that makes its own history reader a push consumer delivering onto another
// agent's DM subject gets the server to write its channel post into DM_<space> (issue 12
// item 10). The recipient never surfaces it as a DM: its next real DM is the first and
// only thing it sees. (nats-server 2.15 stores the copy under the post's own chat
// subject, outside the recipient's DM filter; were a server to store it on the deliver
// subject, the receive checks reject it as route-mismatch, see the test below.)
func TestChannelPostPushedOntoDMSubjectIsNotADM(t *testing.T) {
	r := newRouteMesh(t)
	ctx := t.Context()
	aliceP := r.alice.Principal()
	dmSubject := protocol.InstSubject(space, r.bob.Principal(), aliceP)

	// The server delivers only while someone listens live on the deliver subject itself
	// (a push consumer counts only a subscription on the literal subject as interest:
	// neither an InstAll tap nor DM_<space>'s own capture): an admin, who may read every
	// unicast.
	web := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "web"}
	wnc := r.m.Connect(r.m.Mint(space, trust.UserSpec{Name: "web", Profile: trust.ProfileAdmin, Principal: web, LifecycleUID: "wwwwwwwwwwwwwwwwwwwwwwwwww"}))
	tap, err := wnc.SubscribeSync(dmSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}

	// The attack: alice's one history reader, on the create subject her grant pins
	// ($JS.API.CONSUMER.CREATE.CHAT_<space>.<name>.<general's filter>), made a push
	// consumer whose deliver subject is bob's DM subject from her.
	ajs, err := jetstream.New(r.alice.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.CreateOrUpdatePushConsumer(ctx, protocol.StreamChat(space), jetstream.ConsumerConfig{
		Name:           protocol.ConsumerHistory(aliceP, r.aliceUID),
		FilterSubject:  protocol.ChannelFilter(space, "general"),
		DeliverSubject: dmSubject,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckNonePolicy,
	}); err != nil {
		t.Fatalf("alice creates her history reader as a push consumer onto bob's DM subject: %v", err)
	}
	post, err := r.alice.Post(ctx, "general", client.Text("a channel post, not a DM"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tap.NextMsg(hangGuard); err != nil {
		t.Fatalf("the admin's tap on bob's DM subject saw no push delivery: %v", err)
	}

	// The server wrote the post into DM_<space>.
	dm, err := r.js.Stream(ctx, protocol.StreamDM(space))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the pushed post stored in DM_"+space, hangGuard, func() bool {
		info, err := dm.Info(ctx)
		if err != nil || info.State.Msgs == 0 {
			return false
		}
		stored, err := dm.GetMsg(ctx, info.State.LastSeq)
		if err != nil || stored.Header.Get("Nats-Msg-Id") != post.ID {
			return false
		}
		t.Logf("DM_%s holds alice's post on %s", space, stored.Subject)
		return true
	})

	r.realDMFirstAndOnly(t)
}

// A message on bob's DM subject from alice whose payload names a channel instead of bob
// is not surfaced: the receive checks reject it as route-mismatch, and bob's next real
// DM is the first and only thing he sees.
func TestChannelPayloadOnDMSubjectIsRejected(t *testing.T) {
	r := newRouteMesh(t)
	m := r.alice.Envelope(client.Text("a channel post, on bob's DM subject"))
	m.Channel = "general"
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(r.alice.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.Publish(t.Context(), protocol.InstSubject(space, r.bob.Principal(), r.alice.Principal()), body); err != nil {
		t.Fatal(err)
	}
	r.realDMFirstAndOnly(t)
	if !strings.Contains(r.bobLog.String(), "reason=route-mismatch") {
		t.Fatalf("bob did not log the channel payload as route-mismatch:\n%s", r.bobLog.String())
	}
}
