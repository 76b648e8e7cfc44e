package agentmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

type statusOf struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	ToID   string `json:"toId"`
	Reader string `json:"reader"`
	ReadAt string `json:"readAt"`
}

type window struct {
	Messages []agentmcp.Item `json:"messages"`
}

// dmID sends text from cs to peer with cotal_dm and returns the DM's id.
func dmID(t *testing.T, cs *mcp.ClientSession, to, text string) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	callOut(t, cs, "cotal_dm", map[string]any{"to": to, "text": text}, &out)
	return out.ID
}

// readUntil calls cotal_inbox on cs until the items read so far hold one for which done
// is true, and returns them all with the text the model read.
func readUntil(t *testing.T, cs *mcp.ClientSession, what string, done func(agentmcp.Item) bool) ([]agentmcp.Item, string) {
	t.Helper()
	var items []agentmcp.Item
	var texts []string
	meshtest.Until(t, what, textHang, func() bool {
		var w window
		texts = append(texts, callOut(t, cs, "cotal_inbox", nil, &w))
		items = append(items, w.Messages...)
		for _, it := range items {
			if done(it) {
				return true
			}
		}
		return false
	})
	return items, strings.Join(texts, "\n")
}

func receiptOf(id string) func(agentmcp.Item) bool {
	return func(it agentmcp.Item) bool { return it.Kind == "receipt" && it.Receipt != nil && it.Receipt.Of == id }
}

func receipts(items []agentmcp.Item) []string {
	var out []string
	for _, it := range items {
		if it.Kind == "receipt" {
			out = append(out, it.Receipt.Of)
		}
	}
	return out
}

// A DM's sender learns it was read: cotal_status_of answers delivered until the
// recipient's model has it, then read (by whom, when), and a read receipt arrives in the
// sender's inbox as a small item. A receipt is never answered by a receipt.
func TestReadReceiptReachesTheSender(t *testing.T) {
	tm := newTextMesh(t)
	alice, _ := tm.agentServer(t, "alice", "")
	bob, _ := tm.agentServer(t, "bob", "")

	id := dmID(t, alice, "bob", "please review the parser")
	st, _ := structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": id})
	if st.State != agentmcp.StateDelivered || st.ToID != "local.bob" {
		t.Fatalf("status of a sent DM: %+v", st)
	}
	readUntil(t, bob, "bob reads the DM", func(it agentmcp.Item) bool { return it.ID == id })

	items, txt := readUntil(t, alice, "alice gets the read receipt", receiptOf(id))
	if !strings.Contains(txt, "read receipt: bob read your direct message "+id) || !strings.Contains(txt, `kind="receipt"`) {
		t.Fatalf("the receipt as the model reads it:\n%s", txt)
	}
	st, stTxt := structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": id})
	if st.State != agentmcp.StateRead || st.Reader != "local.bob" || st.ReadAt == "" || !strings.Contains(stTxt, "read by bob") {
		t.Fatalf("status after the receipt: %+v\n%s", st, stTxt)
	}
	if got := receipts(items); len(got) != 1 {
		t.Fatalf("alice got receipts %v", got)
	}

	// No receipt for a receipt: alice read bob's receipt above; she now reads a DM from
	// bob, whose receipt is sent after any she would owe for the first (one sender, in
	// order), so bob's inbox holding that receipt alone shows none was sent for his.
	ping := dmID(t, bob, "alice", "ping")
	readUntil(t, alice, "alice reads the ping", func(it agentmcp.Item) bool { return it.ID == ping })
	items, _ = readUntil(t, bob, "bob gets the receipt of the ping", receiptOf(ping))
	if got := receipts(items); len(got) != 1 || got[0] != ping {
		t.Fatalf("bob got receipts %v, want the ping's alone", got)
	}

	st, _ = structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": "never-sent"})
	if st.State != agentmcp.StateUnknown {
		t.Fatalf("status of an unknown id: %+v", st)
	}
	if txt, isErr := call(t, alice, "cotal_status_of", map[string]any{"id": "has space"}); !isErr {
		t.Fatalf("a bad id was accepted: %s", txt)
	}
}

// A session may turn receipts off (privacy), and under mode read a receipt goes only
// once cotal_ack settles the DM.
func TestReceiptsOffAndReadMode(t *testing.T) {
	tm := newTextMesh(t)
	alice, _ := tm.agentServer(t, "alice", "")
	bob, _ := tm.agentServer(t, "bob", "")

	var ack struct {
		Receipts string `json:"receipts"`
		Mode     string `json:"mode"`
	}
	callOut(t, bob, "cotal_ack", map[string]any{"receipts": "off"}, &ack)
	if ack.Receipts != agentmcp.ReceiptsOff {
		t.Fatalf("receipts %q after off", ack.Receipts)
	}
	private := dmID(t, alice, "bob", "read this quietly")
	readUntil(t, bob, "bob reads the private DM", func(it agentmcp.Item) bool { return it.ID == private })

	callOut(t, bob, "cotal_ack", map[string]any{"receipts": "on", "mode": "read"}, &ack)
	if ack.Receipts != agentmcp.ReceiptsOn || ack.Mode != agentmcp.AckRead {
		t.Fatalf("ack %+v", ack)
	}
	first := dmID(t, alice, "bob", "first")
	second := dmID(t, alice, "bob", "second")
	readUntil(t, bob, "bob is shown both", func(it agentmcp.Item) bool { return it.ID == second })
	settle := func(id string) {
		meshtest.Until(t, "bob settles "+id, textHang, func() bool { // once its window was written
			var out struct {
				Settled []string `json:"settled"`
			}
			callOut(t, bob, "cotal_ack", map[string]any{"ids": []string{id}}, &out)
			return len(out.Settled) == 1
		})
	}
	settle(second)

	// Receipts go out in the order owed: had one gone for the private DM, or for the
	// first when it was only shown, it would come before the second's.
	items, _ := readUntil(t, alice, "alice gets the receipt of the acked DM", receiptOf(second))
	if got := receipts(items); len(got) != 1 || got[0] != second {
		t.Fatalf("alice got receipts %v, want the second's alone", got)
	}
	for _, id := range []string{private, first} {
		if st, _ := structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": id}); st.State != agentmcp.StateDelivered {
			t.Fatalf("status of %s: %+v, want delivered (not read)", id, st)
		}
	}
	settle(first)
	meshtest.Until(t, "the first is read once acked", textHang, func() bool {
		st, _ := structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": first})
		return st.State == agentmcp.StateRead
	})
	if txt, isErr := call(t, bob, "cotal_ack", map[string]any{"receipts": "maybe"}); !isErr {
		t.Fatalf("receipts maybe was accepted: %s", txt)
	}
}

// A receipt is authored by the reader's own credential: the broker refuses one published
// in another agent's name (raw nats.go on a real minted credential), and a receipt a
// bystander sends in its own name for a DM it never got is dropped by the sender.
func TestForgedReceiptRefused(t *testing.T) {
	tm := newTextMesh(t)
	alice, _ := tm.agentServer(t, "alice", "")
	carol, _ := tm.agentServer(t, "carol", "")
	id := dmID(t, alice, "carol", "for carol only")

	creds, _ := tm.agentCreds(t, "mallory", "")
	errs := make(chan error, 16)
	nc := tm.m.Connect(creds, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	aliceP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	receipt := func(from string) []byte {
		m := protocol.Message{ID: client.NewID(), TS: time.Now().UnixMilli(), Space: space, To: aliceP.String(),
			From:  protocol.EndpointRef{ID: "local." + from, Name: from},
			Parts: []protocol.Part{protocol.ReceiptPart(id, time.Now())}}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// In carol's name: the subject's sender tokens are carol's, which mallory may not use.
	carolP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "carol"}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, protocol.InstSubject(space, aliceP, carolP), receipt("carol")); err == nil {
		t.Fatal("the broker stored a receipt published in carol's name")
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("broker answer: %v", err)
		}
	case <-time.After(textHang):
		t.Fatal("the broker did not refuse the forged receipt")
	}
	// In its own name, for a DM alice sent carol: stored, and dropped by alice.
	malloryP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "mallory"}
	if _, err := js.Publish(t.Context(), protocol.InstSubject(space, aliceP, malloryP), receipt("mallory")); err != nil {
		t.Fatalf("mallory's own DM: %v", err)
	}
	// carol reads it for real: her receipt is stored after mallory's, so once alice has
	// it she has seen mallory's too.
	readUntil(t, carol, "carol reads the DM", func(it agentmcp.Item) bool { return it.ID == id })
	items, txt := readUntil(t, alice, "alice gets carol's receipt", receiptOf(id))
	if got := receipts(items); len(got) != 1 || strings.Contains(txt, "mallory") {
		t.Fatalf("alice was shown receipts %v:\n%s", got, txt)
	}
	st, _ := structured[statusOf](t, alice, "cotal_status_of", map[string]any{"id": id})
	if st.State != agentmcp.StateRead || st.Reader != "local.carol" {
		t.Fatalf("status %+v, want read by carol", st)
	}
}

// daemonMesh is an operator-mode mesh whose channels are durable by default, with the
// delivery daemon running.
func daemonMesh(t *testing.T) *searchMesh {
	t.Helper()
	m := meshtest.Start(t, space)
	tm := &textMesh{m: m, js: m.Provision(space, provision.Options{DefaultDeliveryClass: provision.ClassDurable})}
	l := deliverytest.Lane(t, m, space)
	l.AckWait = 2 * time.Second
	deliverytest.Serve(t, l)
	return &searchMesh{tm}
}

// A mention of an agent on a durable channel it has not joined reaches it through the
// daemon's hand-off: as "mentioned you on #c" with the post's text and id when it may
// read the channel, and without the text when it may not.
func TestMentionReachesAgentsThatHaveNotJoined(t *testing.T) {
	sm := daemonMesh(t)
	bob := serveEndpoint(t, sm.endpoint(t, "bob", "general", "secret"), "general") // may read secret
	eve := serveEndpoint(t, sm.endpoint(t, "eve", "general"), "general")           // may not
	alice := sm.endpoint(t, "alice", "general", "secret")
	if err := alice.Join(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	const body = "bob and eve: the migration plan is in docs/plan.md"
	sent, err := alice.Post(t.Context(), "secret", client.Draft{Parts: client.Text(body).Parts, Mentions: []string{"bob", "eve"}})
	if err != nil {
		t.Fatal(err)
	}
	isPost := func(it agentmcp.Item) bool { return it.ID == sent.ID }

	items, txt := readUntil(t, bob, "bob is told of the mention", isPost)
	if !strings.Contains(txt, "mentioned you on #secret: "+body) || !strings.Contains(txt, `id="`+sent.ID+`"`) || !strings.Contains(txt, `kind="mention"`) {
		t.Fatalf("bob's inbox text:\n%s", txt)
	}
	for _, it := range items {
		if isPost(it) && (!it.MentionedYou || it.Withheld || it.Channel != "secret") {
			t.Fatalf("bob's item %+v", it)
		}
	}
	if whole := mustCall(t, bob, "cotal_message", map[string]any{"id": sent.ID}); !strings.Contains(whole, body) {
		t.Fatalf("cotal_message of the mention:\n%s", whole)
	}

	items, txt = readUntil(t, eve, "eve is told of the mention", isPost)
	if !strings.Contains(txt, "mentioned you on #secret (post "+sent.ID+"); you may not read #secret") || strings.Contains(txt, "migration") {
		t.Fatalf("eve's inbox text:\n%s", txt)
	}
	for _, it := range items {
		if isPost(it) && (!it.MentionedYou || !it.Withheld || it.From != "alice") {
			t.Fatalf("eve's item %+v", it)
		}
	}
}
