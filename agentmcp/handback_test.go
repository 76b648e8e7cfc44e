package agentmcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// durableSession runs one session of an agent's cotal mcp server (agentmcp.Server on a
// new endpoint of the credential creds, incarnation uid) joined to general, and returns
// the model's session and how the session ends: as a client closing stdin ends `cotal
// mcp`, then the endpoint closes.
func durableSession(t *testing.T, sm *searchMesh, creds []byte, name, uid string) (*mcp.ClientSession, func()) {
	t.Helper()
	ep, err := client.New(sm.m.Connect(creds), client.Config{Space: space, Name: name, LifecycleUID: uid})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Channels: []string{"general"}, Ready: func() { close(ready) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
			_ = ep.Close()
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("server ended: %v", err)
	case <-time.After(textHang):
		t.Fatal("the agent never joined")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, name+"'s backstop on general", textHang, func() bool {
		ok, _, _ := ep.Backstop("general")
		return ok
	})
	end := func() {
		t.Helper()
		stopped = true
		_ = cs.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(textHang):
			t.Fatal("Run did not return once the client went away")
		}
		cancel()
		if err := ep.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return cs, end
}

// Channel posts the server holds unread when the session ends reached it live, so they
// have no durable copy to nak; the endpoint must not count them taken when the server
// moved them into its inbox (its position to the delivery daemon stops short of them),
// so the daemon copies them to the next session of the agent, which gets each of them.
func TestUnreadLivePostsComeBackToTheNextSession(t *testing.T) {
	sm := daemonMesh(t)
	creds, uid := sm.agentCreds(t, "bob", "")
	alice := sm.endpoint(t, "alice", "general")
	if err := alice.Join(t.Context(), "general"); err != nil {
		t.Fatal(err)
	}
	post := func(text string) {
		t.Helper()
		if _, err := alice.Post(t.Context(), "general", client.Text(text)); err != nil {
			t.Fatal(err)
		}
	}

	bob, end := durableSession(t, sm, creds, "bob", uid)
	post("read in the first session")
	readUntil(t, bob, "bob reads the first post", func(it agentmcp.Item) bool { return it.Text == "read in the first session" })
	const n = 3
	for i := range n {
		post(fmt.Sprintf("unread %d", i))
	}
	meshtest.Until(t, "bob's server holds the posts unread", textHang, func() bool {
		res, err := bob.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: agentmcp.InboxURI})
		return err == nil && len(res.Contents) == 1 && strings.HasPrefix(res.Contents[0].Text, fmt.Sprintf("%d messages waiting", n))
	})
	end()

	bob, _ = durableSession(t, sm, creds, "bob", uid)
	last := fmt.Sprintf("unread %d", n-1)
	items, _ := readUntil(t, bob, "bob's next session gets the unread posts", func(it agentmcp.Item) bool { return it.Text == last })
	seen := map[string]int{}
	for _, it := range items {
		seen[it.Text]++
	}
	for i := range n {
		if text := fmt.Sprintf("unread %d", i); seen[text] != 1 {
			t.Errorf("%q shown %d times, want once", text, seen[text])
		}
	}
	for text, k := range seen {
		if k > 1 {
			t.Errorf("%q shown %d times", text, k)
		}
	}
}
