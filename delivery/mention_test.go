package delivery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// lastCopy is the newest hand-off copy stored for actor.
func (m *mesh) lastCopy(actor string) *jetstream.RawStreamMsg {
	m.t.Helper()
	s, err := m.js.Stream(m.t.Context(), protocol.StreamDLV(space))
	if err != nil {
		m.t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(m.t.Context(), protocol.DLVSubject(space, protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}, m.uid(actor)))
	if err != nil {
		m.t.Fatal(err)
	}
	return msg
}

// TestMentionOfNonMemberOnDurableChannel: on a durable channel only members got copies,
// so a mention of an agent that had not joined it was lost. Now a mentioned non-member
// that may read the channel gets the post (reason mention), and one that may not read it
// gets a mention notice naming who, where and the post's id, without its text; a member
// gets its one member copy, and the sender nothing.
func TestMentionOfNonMemberOnDurableChannel(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	bob := m.endpoint(m.agent("bob", "general", "secret")) // may read secret, never joined it
	eve := m.endpoint(m.agent("eve", "general"))           // may not read secret
	dave := m.endpoint(m.agent("dave", "secret"))          // a member of secret
	for _, ep := range []*client.Endpoint{bob, eve} {      // durable joins record their ACLs
		if err := ep.JoinChannel(t.Context(), "general"); err != nil {
			t.Fatal(err)
		}
	}
	if err := dave.JoinChannel(t.Context(), "secret"); err != nil {
		t.Fatal(err)
	}
	alice := m.endpoint(m.agent("alice", "general", "secret"))
	const secret = "the launch code is 0000"
	sent, err := alice.Post(t.Context(), "secret", client.Draft{Parts: client.Text(secret).Parts, Mentions: []string{"bob", "eve", "dave", "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob's and eve's mention copies", deadline, func() bool {
		return m.stored("bob") == 1 && m.stored("eve") == 1 && m.stored("dave") == 1
	})
	if n := m.stored("alice"); n != 0 {
		t.Fatalf("the sender has %d copies of its own post", n)
	}
	if r := m.lastCopy("dave").Header.Get(protocol.HeaderReason); r != protocol.HandoffDurableChannel {
		t.Fatalf("dave's copy: reason %q, want its member copy only", r)
	}
	bobCopy := m.lastCopy("bob")
	if r := bobCopy.Header.Get(protocol.HeaderReason); r != protocol.HandoffMention || !strings.Contains(string(bobCopy.Data), secret) {
		t.Fatalf("bob's copy: reason %q, body %s", r, bobCopy.Data)
	}
	eveCopy := m.lastCopy("eve")
	if r := eveCopy.Header.Get(protocol.HeaderReason); r != protocol.HandoffMentionNotice {
		t.Fatalf("eve's copy: reason %q", r)
	}
	if strings.Contains(string(eveCopy.Data), "launch") {
		t.Fatalf("eve, who may not read secret, was given its text: %s", eveCopy.Data)
	}

	// Through the client: bob reads the post, eve the notice naming it.
	in := clienttest.Receive(t, bob, deadline)
	if in.ID != sent.ID || in.Text() != secret || in.Reason != protocol.HandoffMention || in.Subject.Channel != "secret" {
		t.Fatalf("bob got %+v", in)
	}
	in = clienttest.Receive(t, eve, deadline)
	n, ok := protocol.MentionNoticeOf(&in.Message)
	if !ok || n.Of != sent.ID || n.Channel != "secret" || in.Text() != "" || in.Reason != protocol.HandoffMentionNotice ||
		in.Subject.Sender != alice.Principal() {
		t.Fatalf("eve got %+v (notice %+v)", in, n)
	}
	raw, _ := json.Marshal(in.Message)
	if strings.Contains(string(raw), "launch") {
		t.Fatalf("eve's notice holds the text: %s", raw)
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}
}
