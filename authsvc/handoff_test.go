package authsvc

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// TestCalloutMemberGetsCopiesOfARowItDidNotWrite: a person admitted through the auth
// callout consumes its hand-off durable from Join on, empty or not, as a minted agent
// does. A membership another party writes for it (a workflow conclave's run host) then
// brings it the channel's posts while it stays connected, not only after a reconnect.
func TestCalloutMemberGetsCopiesOfARowItDidNotWrite(t *testing.T) {
	f := startLane(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	dl := deliverytest.Lane(t, f.Mesh, testSpace)
	dl.Logger = log
	deliverytest.Serve(t, dl)

	opts := f.userOptions(t, "alice")
	opts.Config.Logger = log
	alice, err := userauth.Connect(t.Context(), opts)
	if err != nil {
		t.Fatalf("connect as alice: %v", err)
	}
	t.Cleanup(func() { _ = alice.Close() })
	if err := alice.Join(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The run host's part: a row for alice on general, written by someone else.
	admin := f.Provisioner(testSpace)
	p := alice.Principal()
	dlv, err := admin.Stream(t.Context(), protocol.StreamDLV(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for name := range dlv.ConsumerNames(t.Context()).Name() {
		if rest, ok := strings.CutPrefix(name, protocol.ConsumerDLVPrefix(p)); ok {
			uid = rest
		}
	}
	if uid == "" {
		t.Fatalf("alice (%s) has no hand-off durable", p)
	}
	chat, err := admin.Stream(t.Context(), protocol.StreamChat(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	members, err := admin.KeyValue(t.Context(), protocol.BucketMembers(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	activated := true
	row, err := json.Marshal(protocol.Membership{Channel: "general", Owner: p.String(), UID: uid, State: protocol.MembershipActive,
		JoinCursor: chat.CachedInfo().State.LastSeq, Activated: &activated, Generation: 1, Writer: "run host",
		UpdatedAt: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.Create(t.Context(), protocol.MembershipKey("general", p, uid), row); err != nil {
		t.Fatal(err)
	}

	poster := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	const puid = "bob00000000000000000000000"
	if _, err := provision.Agent(t.Context(), admin, testSpace, poster, puid, ""); err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(f.Mint(testSpace, trust.UserSpec{Name: "bob", Profile: trust.ProfileAgent, Principal: poster, LifecycleUID: puid,
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := client.Connect(t.Context(), f.URL, client.Config{Space: testSpace, Name: "bob", LifecycleUID: puid, Logger: log},
		nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close() })
	if _, err := bob.Post(t.Context(), "general", client.Text("for the room")); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-alice.Messages():
		if in.Text() != "for the room" || !in.Durable {
			t.Fatalf("alice got %q (durable %v), want bob's post as a hand-off copy", in.Text(), in.Durable)
		}
		if err := in.Ack(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(deadline):
		t.Fatal("bob's post never reached alice, who stayed connected: her hand-off durable was not consumed")
	}
}
