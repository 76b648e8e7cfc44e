package agentmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// callOut calls tool and decodes its structured result into out; it fails the test when
// the call is refused.
func callOut(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s %v: %s", tool, args, strings.Join(texts, "\n"))
	}
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: structured result %s: %v", tool, raw, err)
		}
	}
	return strings.Join(texts, "\n")
}

// dmConsumer is the info of name's DM durable, read on the broker.
func dmConsumer(t *testing.T, url, name string) *jetstream.ConsumerInfo {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), protocol.StreamDM(space))
	if err != nil {
		t.Fatal(err)
	}
	prefix := protocol.ConsumerDMPrefix(protocol.Principal{Owner: protocol.OwnerLocal, Actor: name})
	names := st.ConsumerNames(t.Context())
	for n := range names.Name() {
		if strings.HasPrefix(n, prefix) {
			c, err := st.Consumer(t.Context(), n)
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return info
		}
	}
	t.Fatalf("no DM durable for %s", name)
	return nil
}

var aliceID = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}

// cotal_wait blocks (the client hears progress while it does), returns the DM that
// arrives, acks it once the result is written, and leaves what its filter does not
// admit in the inbox.
func TestWaitReturnsWhatArrives(t *testing.T) {
	rm := newRefMesh(t)
	var mu sync.Mutex
	progress := 0
	st, ct := mcp.NewInMemoryTransports()
	ep, err := client.Connect(t.Context(), rm.url, client.Config{Space: space, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Channels: []string{"general"}, WaitProgress: 20 * time.Millisecond, Ready: func() { close(ready) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	t.Cleanup(func() { cancel(); <-done; _ = ep.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress++
			mu.Unlock()
		}}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	<-ready
	bob := rm.peer(t, "bob", "general")

	// A channel post arrives first: a wait for DMs only is not woken by it.
	if _, err := bob.Post(t.Context(), "general", client.Text("just chatter")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		text string
		out  struct {
			Messages []agentmcp.Item `json:"messages"`
			TimedOut bool            `json:"timedOut"`
		}
		err error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		params := &mcp.CallToolParams{Name: "cotal_wait", Arguments: map[string]any{"timeout": 60, "kinds": []string{"dm"}}}
		params.SetProgressToken("w1")
		res, err := cs.CallTool(t.Context(), params)
		if err != nil {
			r.err = err
		} else {
			raw, _ := json.Marshal(res.StructuredContent)
			r.err = json.Unmarshal(raw, &r.out)
			r.text = res.Content[0].(*mcp.TextContent).Text
		}
		got <- r
	}()
	meshtest.Until(t, "the blocked wait sends progress", textHang, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return progress >= 2
	})
	sent, err := bob.DM(t.Context(), aliceID, client.Text("wake up, alice"))
	if err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(textHang):
		t.Fatal("cotal_wait did not return after the DM")
	}
	if r.err != nil || r.out.TimedOut || len(r.out.Messages) != 1 || r.out.Messages[0].ID != sent.ID {
		t.Fatalf("wait returned %+v (%v):\n%s", r.out, r.err, r.text)
	}
	if !strings.Contains(r.text, "wake up, alice") || !strings.Contains(r.text, `id="`+sent.ID+`"`) {
		t.Fatalf("the text the model reads lacks the DM or its id:\n%s", r.text)
	}
	meshtest.Until(t, "the DM is acked once the result was written", textHang, func() bool {
		info := dmConsumer(t, rm.url, "alice")
		return info.NumAckPending == 0 && info.AckFloor.Stream >= sent.Seq
	})
	// The post the filter left out is still in the inbox; a short wait for DMs times out.
	var w struct {
		TimedOut bool `json:"timedOut"`
	}
	callOut(t, cs, "cotal_wait", map[string]any{"timeout": 1, "kinds": []string{"dm"}}, &w)
	if !w.TimedOut {
		t.Fatal("a wait with nothing matching did not time out")
	}
	if txt := mustCall(t, cs, "cotal_wait", map[string]any{"timeout": 5}); !strings.Contains(txt, "just chatter") {
		t.Fatalf("an unfiltered wait did not return the held post:\n%s", txt)
	}
	if txt, isErr := call(t, cs, "cotal_wait", map[string]any{"timeout": agentmcp.MaxWaitSeconds + 1}); !isErr {
		t.Fatalf("a wait beyond the bound was accepted: %s", txt)
	}
}

// Peek leaves a DM in the inbox, unacked on the broker; cotal_ack settles it (the
// consumer's ack floor passes it) and it is never shown again.
func TestPeekThenAckSettles(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	bob := rm.peer(t, "bob")
	sent, err := bob.DM(t.Context(), aliceID, client.Text("ack me"))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the DM shows under peek with its id", textHang, func() bool {
		txt := mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true})
		return strings.Contains(txt, "ack me") && strings.Contains(txt, sent.ID)
	})
	if info := dmConsumer(t, rm.url, "alice"); info.NumAckPending != 1 || info.AckFloor.Stream >= sent.Seq {
		t.Fatalf("after peek the DM is not held unacked: ack pending %d, floor %d", info.NumAckPending, info.AckFloor.Stream)
	}
	var out struct {
		Settled []string `json:"settled"`
		Unknown []string `json:"unknown"`
	}
	callOut(t, alice, "cotal_ack", map[string]any{"ids": []string{sent.ID, "no-such-id"}}, &out)
	if len(out.Settled) != 1 || out.Settled[0] != sent.ID || len(out.Unknown) != 1 {
		t.Fatalf("ack: %+v", out)
	}
	meshtest.Until(t, "the broker has the DM acked", textHang, func() bool {
		info := dmConsumer(t, rm.url, "alice")
		return info.NumAckPending == 0 && info.AckFloor.Stream >= sent.Seq
	})
	if txt := mustCall(t, alice, "cotal_inbox", nil); strings.Contains(txt, "ack me") {
		t.Fatalf("an acked DM was shown again:\n%s", txt)
	}
}

// Under mode read, a DM cotal_inbox returned stays unacked until cotal_ack names it.
func TestReadModeHoldsUntilAck(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	var mode struct {
		Mode    string `json:"mode"`
		Pending int    `json:"pending"`
	}
	callOut(t, alice, "cotal_ack", map[string]any{"mode": "read"}, &mode)
	if mode.Mode != agentmcp.AckRead {
		t.Fatalf("mode %q", mode.Mode)
	}
	bob := rm.peer(t, "bob")
	sent, err := bob.DM(t.Context(), aliceID, client.Text("read me, then say so"))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the DM is read", textHang, func() bool {
		return strings.Contains(mustCall(t, alice, "cotal_inbox", nil), "read me")
	})
	meshtest.Until(t, "the read DM awaits cotal_ack", textHang, func() bool {
		callOut(t, alice, "cotal_ack", map[string]any{}, &mode)
		return mode.Pending == 1
	})
	if info := dmConsumer(t, rm.url, "alice"); info.NumAckPending != 1 {
		t.Fatalf("a DM awaiting cotal_ack is not pending on the broker: %d", info.NumAckPending)
	}
	callOut(t, alice, "cotal_ack", map[string]any{"ids": []string{sent.ID}}, &mode)
	if mode.Pending != 0 {
		t.Fatalf("pending %d after the ack", mode.Pending)
	}
	meshtest.Until(t, "the broker has the DM acked", textHang, func() bool {
		info := dmConsumer(t, rm.url, "alice")
		return info.NumAckPending == 0 && info.AckFloor.Stream >= sent.Seq
	})
}

// Five replies through cotal_send replyTo make one thread that cotal_thread returns in
// order; the inbox text shows each reply's id, replyTo and thread.
func TestThreadOfFiveRepliesInOrder(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	bob, _, _ := rm.session(t, "bob", []string{"general"}, nil)
	var root struct {
		ID string `json:"id"`
	}
	callOut(t, alice, "cotal_send", map[string]any{"text": "plan: ship it?"}, &root)
	meshtest.Until(t, "bob reads the root", textHang, func() bool {
		return strings.Contains(mustCall(t, bob, "cotal_inbox", nil), root.ID)
	})
	var replies []string
	for i := range 5 {
		var r struct {
			ID string `json:"id"`
		}
		// The second reply answers the first: a reply to a reply stays in the thread.
		to := root.ID
		if i == 1 {
			to = replies[0]
		}
		callOut(t, bob, "cotal_send", map[string]any{"text": "reply " + string(rune('1'+i)), "replyTo": to}, &r)
		replies = append(replies, r.ID)
	}
	var inbox strings.Builder
	meshtest.Until(t, "alice reads the five replies", textHang, func() bool {
		inbox.WriteString(mustCall(t, alice, "cotal_inbox", nil))
		return strings.Count(inbox.String(), "reply ") >= 5
	})
	if !strings.Contains(inbox.String(), `replyTo="`+root.ID+`"`) || !strings.Contains(inbox.String(), `thread="`+root.ID+`"`) {
		t.Fatalf("the inbox text lacks replyTo and thread:\n%s", inbox.String())
	}
	for _, who := range []*mcp.ClientSession{alice, bob} {
		var th struct {
			Thread   string          `json:"thread"`
			Messages []agentmcp.Item `json:"messages"`
		}
		txt := callOut(t, who, "cotal_thread", map[string]any{"id": replies[3]}, &th)
		want := append([]string{root.ID}, replies...)
		var ids []string
		for _, m := range th.Messages {
			ids = append(ids, m.ID)
		}
		if th.Thread != root.ID || strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Fatalf("thread %s: %v, want %v\n%s", th.Thread, ids, want, txt)
		}
		if i1, i5 := strings.Index(txt, "reply 1"), strings.Index(txt, "reply 5"); i1 < 0 || i5 < i1 {
			t.Fatalf("the thread text is not in order:\n%s", txt)
		}
	}
	var whole agentmcp.Item
	callOut(t, alice, "cotal_message", map[string]any{"id": replies[4]}, &whole)
	if whole.Text != "reply 5" || whole.ReplyTo != root.ID {
		t.Fatalf("cotal_message: %+v", whole)
	}
}

// schemaBounds reports every string without maxLength (or an enum) and every list
// without maxItems in s, under path.
func schemaBounds(path string, s map[string]any) []string {
	var bad []string
	types := []string{}
	switch tv := s["type"].(type) {
	case string:
		types = append(types, tv)
	case []any:
		for _, x := range tv {
			if str, ok := x.(string); ok {
				types = append(types, str)
			}
		}
	}
	for _, ty := range types {
		switch ty {
		case "string":
			if _, ok := s["maxLength"]; !ok && s["enum"] == nil && s["const"] == nil {
				bad = append(bad, path+": string without maxLength")
			}
		case "array":
			if _, ok := s["maxItems"]; !ok {
				bad = append(bad, path+": list without maxItems")
			}
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for k, v := range props {
			if sub, ok := v.(map[string]any); ok {
				bad = append(bad, schemaBounds(path+"."+k, sub)...)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		bad = append(bad, schemaBounds(path+"[]", items)...)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		bad = append(bad, schemaBounds(path+"{}", ap)...)
	}
	return bad
}

// Every cotal_* tool (the manager tools included) bounds every string with maxLength and
// every list with maxItems, and the message text carries the payload bound.
func TestEveryToolSchemaIsBounded(t *testing.T) {
	rm := newRefMesh(t)
	cs := managerSession(t, rm)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var bad []string
	for _, tool := range res.Tools {
		seen[tool.Name] = true
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, schemaBounds(tool.Name, s)...)
		if tool.Name == "cotal_send" || tool.Name == "cotal_dm" || tool.Name == "cotal_anycast" {
			if m, _ := s["properties"].(map[string]any)["text"].(map[string]any)["maxLength"].(float64); int(m) != agentmcp.MaxTextLength {
				t.Errorf("%s text maxLength %v, want %d", tool.Name, m, agentmcp.MaxTextLength)
			}
		}
	}
	for _, name := range append(append(append([]string{}, agentmcp.ToolNames...), agentmcp.ManagerToolNames...), agentmcp.YieldToolNames...) {
		if !seen[name] {
			t.Errorf("tool %s is not listed, so its schema was not checked", name)
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
	// The bounds hold: a list over its maxItems is refused before anything is sent.
	many := make([]string, agentmcp.MaxMentions+1)
	for i := range many {
		many[i] = "bob"
	}
	if txt, isErr := call(t, cs, "cotal_send", map[string]any{"text": "hi", "mentions": many}); !isErr {
		t.Errorf("cotal_send with %d mentions was accepted: %s", len(many), txt)
	}
	ids := make([]string, agentmcp.MaxAckIDs+1)
	for i := range ids {
		ids[i] = "x"
	}
	if txt, isErr := call(t, cs, "cotal_ack", map[string]any{"ids": ids}); !isErr {
		t.Errorf("cotal_ack with %d ids was accepted: %s", len(ids), txt)
	}
}

// Under mode read, a DM the model read but never acked comes back to the next session of
// the agent: the session hands it back when it ends.
func TestReadModeUnackedComesBack(t *testing.T) {
	rm := newRefMesh(t)
	ep, err := client.Connect(t.Context(), rm.url, client.Config{Space: space, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Channels: []string{"general"}, Ready: func() { close(ready) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ready
	mustCall(t, cs, "cotal_ack", map[string]any{"mode": "read"})
	bob := rm.peer(t, "bob")
	if _, err := bob.DM(t.Context(), aliceID, client.Text("do not lose me")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the first session reads the DM", textHang, func() bool {
		return strings.Contains(mustCall(t, cs, "cotal_inbox", nil), "do not lose me")
	})
	var mode struct {
		Pending int `json:"pending"`
	}
	meshtest.Until(t, "the read DM awaits cotal_ack", textHang, func() bool {
		callOut(t, cs, "cotal_ack", map[string]any{}, &mode)
		return mode.Pending == 1
	})
	_ = cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	next, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	meshtest.Until(t, "the next session gets the unacked DM again", textHang, func() bool {
		return strings.Contains(mustCall(t, next, "cotal_inbox", nil), "do not lose me")
	})
}

// Channel history replayed on join is bounded: a long old post shows its start and how
// much was left out, and cotal_message returns it whole; a short one shows whole.
func TestHistoryIsShownInPart(t *testing.T) {
	rm := newRefMesh(t)
	bob := rm.peer(t, "bob", "general")
	long := strings.Repeat("word ", 2000) + "THE-END"
	old, err := bob.Post(t.Context(), "general", client.Text(long))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Post(t.Context(), "general", client.Text("short old post")); err != nil {
		t.Fatal(err)
	}
	alice, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	var txt string
	var out struct {
		Messages []agentmcp.Item `json:"messages"`
	}
	meshtest.Until(t, "alice reads general's history", textHang, func() bool {
		txt = callOut(t, alice, "cotal_inbox", nil, &out)
		return strings.Contains(txt, "short old post")
	})
	if strings.Contains(txt, "THE-END") || !strings.Contains(txt, "cotal_message {id} returns it whole") {
		t.Fatalf("a long history post was shown whole, or without the way to fetch it:\n%.600s", txt)
	}
	var cut *agentmcp.Item
	for i := range out.Messages {
		if out.Messages[i].ID == old.ID {
			cut = &out.Messages[i]
		}
	}
	if cut == nil || !cut.Historical || !cut.Truncated || len(cut.Text) > 4*agentmcp.SummaryChars {
		t.Fatalf("the structured item of the long post: %+v", cut)
	}
	var whole agentmcp.Item
	callOut(t, alice, "cotal_message", map[string]any{"id": old.ID}, &whole)
	if whole.Text != long {
		t.Fatalf("cotal_message returned %d bytes, want the whole %d", len(whole.Text), len(long))
	}
}
