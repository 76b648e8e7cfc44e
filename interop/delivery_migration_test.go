package interop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// TestDeliveryMigration: a space holding what the previous Go release wrote (its ACL row
// taken from a JWT, its members row, a frame with Cotal-Frame/Cotal-Subject headers and
// the bare envelope, an instance-keyed lease row long gone) is served by the new daemon:
// the member gets its unread old copy and, through its old membership, new posts.
func TestDeliveryMigration(t *testing.T) {
	m := newDLVMesh(t)
	uid := protocol.NewLifecycleUID()
	bob := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	m.put(protocol.BucketACL(space), protocol.MemberKey(bob, uid), []byte(`{"principal":"local.bob","lifecycleUid":"`+uid+
		`","name":"bob","userKey":"UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","subAllow":["cotal.team.chat.*.*.general","_INBOX_x.>"],"issuedAt":1,"updatedAt":1000}`))
	m.put(protocol.BucketMembers(space), "general/"+protocol.MemberKey(bob, uid), []byte(`{"channel":"general","principal":"local.bob","lifecycleUid":"`+uid+
		`","state":"durable-active","joinCursor":0,"generation":1,"writerIdentity":"0123456789abcdef","updatedAt":1000}`))
	if _, err := m.js.CreateConsumer(t.Context(), protocol.StreamDLV(space), jetstreamDLV(bob, uid)); err != nil {
		t.Fatal(err)
	}
	// The old copy is of a post CHAT really holds (sequence 1), as in a space the previous
	// release served; posts after the upgrade come later in CHAT.
	body := []byte(`{"id":"old-1","ts":1,"space":"team","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"unread before the upgrade"}]}`)
	post := nats.NewMsg("cotal.team.chat.local.alice.general")
	post.Header.Set("Nats-Msg-Id", "old-1")
	post.Data = body
	if ack, err := m.js.PublishMsg(t.Context(), post); err != nil || ack.Sequence != 1 {
		t.Fatalf("the old post: %+v, %v", ack, err)
	}
	old := nats.NewMsg(protocol.DLVSubject(space, bob, uid))
	old.Header.Set("Cotal-Frame", "1")
	old.Header.Set("Cotal-Subject", "cotal.team.chat.local.alice.general")
	old.Header.Set("Cotal-Seq", "1")
	old.Header.Set("Cotal-Reason", "durable-channel")
	old.Header.Set("Nats-Msg-Id", "old-1:local.bob."+uid+":1")
	old.Data = body
	if _, err := m.js.PublishMsg(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	m.serve()

	alice := m.endpoint(m.agent("alice", protocol.NewLifecycleUID(), "general"))
	if _, err := alice.Post(t.Context(), "general", client.Text("after the upgrade")); err != nil {
		t.Fatal(err)
	}
	ep := m.endpoint(m.agent("bob", uid, "general"))
	if err := ep.JoinChannel(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"unread before the upgrade": false, "after the upgrade": false}
	for range want {
		select {
		case in := <-ep.Messages():
			if _, ok := want[in.Message.Text()]; !ok || !in.Durable && in.Message.Text() == "unread before the upgrade" {
				t.Fatalf("got %q (durable %v)", in.Message.Text(), in.Durable)
			}
			want[in.Message.Text()] = true
			_ = in.Ack()
		case <-time.After(deadline):
			t.Fatalf("bob got %v", want)
		}
	}
	list, err := ep.Memberships(t.Context())
	if err != nil || len(list) != 1 || list[0].Channel != "general" || list[0].Generation != 1 {
		t.Fatalf("the old membership: %+v, %v", list, err)
	}
	// The rows are rewritten in the reference's form.
	var row map[string]any
	if err := json.Unmarshal(m.get(protocol.BucketMembers(space), "general/"+protocol.MemberKey(bob, uid)), &row); err != nil || row["owner"] != "local.bob" || row["principal"] != nil {
		t.Fatalf("members row after the join: %v, %v", row, err)
	}
	if err := json.Unmarshal(m.get(protocol.BucketACL(space), protocol.MemberKey(bob, uid)), &row); err != nil || row["allowSubscribe"] == nil || row["subAllow"] != nil {
		t.Fatalf("ACL row after the join: %v, %v", row, err)
	}
}
