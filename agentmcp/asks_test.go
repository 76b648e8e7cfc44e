package agentmcp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// inboxWindow calls cotal_inbox with args and returns the texts of its messages and its
// remaining and roleBacklog counts.
func inboxWindow(t *testing.T, cs *mcp.ClientSession, args map[string]any) (texts []string, remaining, backlog int) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "cotal_inbox", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("cotal_inbox %v: %v %+v", args, err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Messages    []agentmcp.Item
		Remaining   int
		RoleBacklog int
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		texts = append(texts, m.Text)
	}
	return texts, out.Remaining, out.RoleBacklog
}

// TestInboxShowsTheRoleBacklogAndTakesSeveralAsks: six asks wait for the worker role. The
// holder's orientation and cotal_inbox count the five not yet taken (remaining was 0
// while they waited), and cotal_inbox with asks takes several at once; asks is bounded.
func TestInboxShowsTheRoleBacklogAndTakesSeveralAsks(t *testing.T) {
	tm := newTextMesh(t)
	creds, uid := tm.agentCreds(t, "alice", "")
	alice, err := client.New(tm.m.Connect(creds), client.Config{Space: space, Name: "alice", LifecycleUID: uid})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Close() })
	w, _ := tm.agentServer(t, "w1", "worker")
	for i := range 6 {
		if _, err := alice.Ask(t.Context(), "worker", client.Text(fmt.Sprintf("ask %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	meshtest.Until(t, "one ask held, five in the role's queue", textHang, func() bool {
		o, _ := call(t, w, "cotal_orientation", nil)
		return strings.Contains(o, "Inbox: 1 waiting (1 direct). 5 more requests wait in the queue of your role worker.")
	})
	texts, remaining, backlog := inboxWindow(t, w, nil)
	if len(texts) != 1 || remaining != 5 || backlog != 5 {
		t.Fatalf("first window %q, remaining %d, backlog %d; want one ask and 5 remaining in the backlog", texts, remaining, backlog)
	}
	if text, _ := call(t, w, "cotal_connection_status", nil); text == "" {
		t.Fatal("no connection status")
	}
	meshtest.Until(t, "the next ask held", textHang, func() bool {
		o, _ := call(t, w, "cotal_orientation", nil)
		return strings.Contains(o, "Inbox: 1 waiting (1 direct). 4 more requests wait")
	})
	texts, remaining, backlog = inboxWindow(t, w, map[string]any{"asks": 3})
	if len(texts) != 3 || remaining != 2 || backlog != 2 {
		t.Fatalf("window of asks=3: %q, remaining %d, backlog %d; want 3 asks and 2 remaining", texts, remaining, backlog)
	}
	seen := map[string]bool{}
	for _, s := range texts {
		if seen[s] {
			t.Fatalf("ask %q given twice", s)
		}
		seen[s] = true
	}
	if text, isErr := call(t, w, "cotal_inbox", map[string]any{"asks": agentmcp.MaxInboxAsks + 1}); !isErr {
		t.Fatalf("asks over the bound accepted: %s", text)
	}
	meshtest.Until(t, "the rest taken", textHang, func() bool {
		texts, remaining, _ = inboxWindow(t, w, map[string]any{"asks": agentmcp.MaxInboxAsks})
		for _, s := range texts {
			seen[s] = true
		}
		return remaining == 0 && len(seen) == 5
	})
}
