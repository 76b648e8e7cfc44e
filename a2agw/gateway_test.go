package a2agw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/client/clienttest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

const space = "main"

// peer connects an agent of name (with role, when given) on its real minted credential,
// as cotal mcp does, and joins.
func peer(t *testing.T, m *meshtest.Mesh, name, role string, caps ...string) *client.Endpoint {
	t.Helper()
	return peerUID(t, m, name, role, protocol.NewLifecycleUID(), caps...)
}

func peerUID(t *testing.T, m *meshtest.Mesh, name, role, uid string, caps ...string) *client.Endpoint {
	t.Helper()
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
	if _, err := provision.Agent(t.Context(), m.Provisioner(space), space, p, uid, role); err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p,
		LifecycleUID: uid, Role: role, Subscribe: []string{}, Capabilities: caps}))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := client.Connect(t.Context(), m.URL, client.Config{Space: space, Name: name, Role: role, LifecycleUID: uid,
		Description: name + " reviews code", Meta: map[string]any{"persona": name}}, c.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ep
}

// gw is a running gateway on a real listener.
type gw struct {
	*a2agw.Gateway
	ep     *client.Endpoint
	uid    string
	srv    *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

// startGateway runs a gateway as local.a2a (lifecycle uid uid) exposing expose.
func startGateway(t *testing.T, m *meshtest.Mesh, uid string, mod func(*a2agw.Config), expose ...string) *gw {
	t.Helper()
	ep := peerUID(t, m, "a2a", "", uid, trust.CapabilityA2AGateway)
	js, err := jetstream.New(ep.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), protocol.BucketA2A(space))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	port := srv.Listener.Addr().(*net_TCPAddr).Port
	cfg := a2agw.Config{Endpoint: ep, Bucket: kv, Expose: expose, BaseURL: "http://" + srv.Listener.Addr().String(), Port: port,
		BlockFor: 20 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	g, err := a2agw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g.Handler()
	srv.Start()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	x := &gw{Gateway: g, ep: ep, uid: uid, srv: srv, cancel: cancel, done: done}
	t.Cleanup(x.stop)
	return x
}

func (x *gw) stop() {
	x.cancel()
	<-x.done
	x.done <- nil
	x.srv.Close()
	_ = x.ep.Close()
}

// drained waits until the gateway has settled every DM its identity was sent.
func (x *gw) drained(t *testing.T, m *meshtest.Mesh) {
	t.Helper()
	cons, err := m.Provisioner(space).Consumer(t.Context(), protocol.StreamDM(space), protocol.ConsumerDM(x.ep.Principal(), x.uid))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the gateway settled its DMs", 20*time.Second, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

func mesh(t *testing.T) *meshtest.Mesh {
	t.Helper()
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	return m
}

type rpcResp struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func call(t *testing.T, base, name, method string, params any) rpcResp {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := http.Post(base+"/agents/"+name, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r rpcResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

func task(t *testing.T, r rpcResp) a2agw.Task {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var tk a2agw.Task
	if err := json.Unmarshal(r.Result, &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

func userMsg(text string) map[string]any {
	return map[string]any{"kind": "message", "messageId": client.NewID(), "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text}}}
}

func text(ps []a2agw.Part) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Text)
	}
	return strings.Join(s, "|")
}

// answer waits for one message at ep and replies to it with text. It may run in its
// own goroutine: it reports with t.Errorf.
func answer(t *testing.T, ep *client.Endpoint, text string) *client.Incoming {
	var in *client.Incoming
	select {
	case in = <-ep.Messages():
	case <-time.After(20 * time.Second):
		t.Errorf("%s received nothing", ep.Principal())
		return nil
	}
	from, err := protocol.ParsePrincipal(in.From.ID)
	if err == nil {
		_, err = ep.DM(context.Background(), from, client.Draft{Parts: []protocol.Part{protocol.TextPart(text)}, ReplyTo: in.ID})
	}
	if err != nil {
		t.Errorf("reply: %v", err)
	}
	_ = in.Ack()
	return in
}

func TestCardsAndBlockingSendToAgent(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "agent:bob")

	var card a2agw.AgentCard
	getJSON(t, g.srv.URL+"/agents/bob/.well-known/agent-card.json", &card)
	if card.Name != "bob" || card.Description != "bob reviews code" || card.URL != g.srv.URL+"/agents/bob" ||
		!card.Capabilities.Streaming || !card.Capabilities.PushNotifications || card.PreferredTransport != "JSONRPC" ||
		card.ProtocolVersion != a2agw.ProtocolVersion || len(card.Skills) != 1 || card.Skills[0].ID != "bob" || len(card.SecuritySchemes) != 0 {
		t.Fatalf("card %+v", card)
	}
	var top a2agw.AgentCard
	getJSON(t, g.srv.URL+"/.well-known/agent-card.json", &top)
	if top.URL != g.srv.URL+"/agents/bob" || len(top.Skills) != 1 || top.Skills[0].ID != "bob" {
		t.Fatalf("gateway card %+v", top)
	}

	go func() {
		in := answer(t, bob, "looks good")
		if text := in.Parts[0].Text; text != "review x.go" {
			t.Errorf("bob got %q", text)
		}
	}()
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("review x.go")}))
	if tk.Status.State != a2agw.StateCompleted || len(tk.Artifacts) != 1 || text(tk.Artifacts[0].Parts) != "looks good" ||
		tk.Status.Message == nil || tk.Status.Message.Role != "agent" || len(tk.History) != 2 {
		t.Fatalf("task %+v", tk)
	}
	got := task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID, "historyLength": 1}))
	if got.Status.State != a2agw.StateCompleted || len(got.History) != 1 {
		t.Fatalf("tasks/get %+v", got)
	}
	if r := call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": "nope"}); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("unknown task: %+v", r)
	}
	if r := call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": map[string]any{"role": "user", "messageId": "x",
		"parts": []any{map[string]any{"kind": "file", "file": map[string]any{"uri": "file:///etc/passwd"}}}}}); r.Error == nil || r.Error.Code != -32005 {
		t.Fatalf("file part: %+v", r)
	}
	resp, err := http.Post(g.srv.URL+"/agents/alice", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a name not exposed: %v %v", resp.Status, err)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// events reads a stream's SSE events (JSON-RPC results) until it ends.
func events(t *testing.T, resp *http.Response) <-chan map[string]any {
	out := make(chan map[string]any, 32)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var r struct {
				Result map[string]any `json:"result"`
			}
			if err := json.Unmarshal([]byte(data), &r); err != nil {
				t.Errorf("event %q: %v", data, err)
				return
			}
			out <- r.Result
		}
	}()
	return out
}

func stream(t *testing.T, base, name, method string, params any) <-chan map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "s", "method": method, "params": params})
	resp, err := http.Post(base+"/agents/"+name, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream answered %s: %s", ct, b)
	}
	return events(t, resp)
}

func TestStreamToRoleAsk(t *testing.T) {
	m := mesh(t)
	rev := peer(t, m, "rev1", "review")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "review")

	var card a2agw.AgentCard
	getJSON(t, g.srv.URL+"/agents/review/.well-known/agent-card.json", &card)
	if card.Name != "review" || card.Description != "rev1 reviews code" {
		t.Fatalf("role card %+v", card)
	}
	evs := stream(t, g.srv.URL, "review", "message/stream", map[string]any{"message": userMsg("review y.go")})
	first := <-evs
	if first["kind"] != "task" {
		t.Fatalf("first event %v", first)
	}
	in := answer(t, rev, "[working] halfway")
	if in.Kind != protocol.DeliveryAnycast {
		t.Fatalf("the role's holder got a %s, want an anycast ask", in.Kind)
	}
	// The holder replies to the same ask again with the result.
	if _, err := rev.DM(t.Context(), protocol.Principal{Owner: "local", Actor: "a2a"}, client.Draft{Parts: []protocol.Part{protocol.TextPart("done: 2 nits")}, ReplyTo: in.ID}); err != nil {
		t.Fatal(err)
	}
	var kinds, states []string
	var art string
	for ev := range evs {
		kinds = append(kinds, fmt.Sprint(ev["kind"]))
		if st, ok := ev["status"].(map[string]any); ok && ev["kind"] == "status-update" {
			states = append(states, fmt.Sprint(st["state"]))
		}
		if a, ok := ev["artifact"].(map[string]any); ok {
			art = fmt.Sprint(a["parts"].([]any)[0].(map[string]any)["text"])
		}
	}
	if art != "done: 2 nits" || states[len(states)-1] != "completed" || !contains(states, "working") {
		t.Fatalf("stream kinds %v states %v artifact %q", kinds, states, art)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestAnswerBeforeTheSendReturns: the agent's answer is recorded before the gateway
// records its send as working; the answer's state (input-required) stands.
func TestAnswerBeforeTheSendReturns(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")
	a2agw.SetAfterSend(g.Gateway, func(id string) {
		meshtest.Until(t, "bob's answer recorded", 20*time.Second, func() bool {
			got := task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": id}))
			return got.Status.State == a2agw.StateInputRequired
		})
	})
	go answer(t, bob, "[input-required] which branch?")
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("merge it")}))
	if tk.Status.State != a2agw.StateInputRequired || tk.Status.Message == nil || text(tk.Status.Message.Parts) != "which branch?" {
		t.Fatalf("task %+v: want input-required with the question", tk)
	}
	got := task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID}))
	if got.Status.State != a2agw.StateInputRequired {
		t.Fatalf("stored task %s, want input-required", got.Status.State)
	}
}

func TestInputRequiredThenFollowUp(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")

	go answer(t, bob, "[input-required] which branch?")
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("merge it")}))
	if tk.Status.State != a2agw.StateInputRequired || tk.Status.Message == nil || text(tk.Status.Message.Parts) != "which branch?" || len(tk.Artifacts) != 0 {
		t.Fatalf("task %+v: want input-required with the question", tk)
	}
	question := tk.Status.Message.MessageID
	follow := userMsg("main")
	follow["taskId"] = tk.ID
	done := make(chan *client.Incoming, 1)
	go func() { done <- answer(t, bob, "merged into main") }()
	tk2 := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": follow}))
	in := <-done
	if in.ReplyTo != question || in.Parts[0].Text != "main" {
		t.Fatalf("bob's follow-up: replyTo %q (want %q), %q", in.ReplyTo, question, in.Parts[0].Text)
	}
	if tk2.ID != tk.ID || tk2.Status.State != a2agw.StateCompleted || text(tk2.Artifacts[0].Parts) != "merged into main" || len(tk2.History) != 4 {
		t.Fatalf("task after the follow-up %+v", tk2)
	}
	follow["messageId"] = client.NewID()
	if r := call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": follow}); r.Error == nil || r.Error.Code != -32004 {
		t.Fatalf("a follow-up on a completed task: %+v", r)
	}
}

func TestCancel(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")

	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("long job"),
		"configuration": map[string]any{"blocking": false}}))
	if tk.Status.State != a2agw.StateWorking {
		t.Fatalf("non-blocking send: %+v", tk)
	}
	ask := clienttest.Receive(t, bob, 20*time.Second)
	_ = ask.Ack()
	c := task(t, call(t, g.srv.URL, "bob", "tasks/cancel", map[string]any{"id": tk.ID}))
	if c.Status.State != a2agw.StateCanceled {
		t.Fatalf("canceled: %+v", c)
	}
	note := clienttest.Receive(t, bob, 20*time.Second)
	if note.ReplyTo != ask.ID || !strings.Contains(note.Parts[0].Text, "canceled") {
		t.Fatalf("bob's cancel note %+v", note.Message)
	}
	_ = note.Ack()
	// A late reply leaves the task canceled.
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: "local", Actor: "a2a"}, client.Draft{Parts: []protocol.Part{protocol.TextPart("done anyway")}, ReplyTo: ask.ID}); err != nil {
		t.Fatal(err)
	}
	if r := call(t, g.srv.URL, "bob", "tasks/cancel", map[string]any{"id": tk.ID}); r.Error == nil || r.Error.Code != -32002 {
		t.Fatalf("cancel of a canceled task: %+v", r)
	}
	g.drained(t, m)
	got := task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID}))
	if got.Status.State != a2agw.StateCanceled || len(got.Artifacts) != 0 {
		t.Fatalf("after a late reply %+v", got)
	}
}

// TestRestartMidTask stops the gateway while the agent works; the reply arrives while it
// is down; a new gateway process (same identity) completes the task from the bucket.
func TestRestartMidTask(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	uid := protocol.NewLifecycleUID()
	g1 := startGateway(t, m, uid, nil, "bob")
	tk := task(t, call(t, g1.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("slow job"),
		"configuration": map[string]any{"blocking": false}}))
	ask := clienttest.Receive(t, bob, 20*time.Second)
	g1.stop()
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: "local", Actor: "a2a"}, client.Draft{Parts: []protocol.Part{protocol.TextPart("finished")}, ReplyTo: ask.ID}); err != nil {
		t.Fatal(err)
	}
	_ = ask.Ack()
	g2 := startGateway(t, m, uid, nil, "bob")
	var got a2agw.Task
	meshtest.Until(t, "the task completed after the restart", 20*time.Second, func() bool {
		got = task(t, call(t, g2.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID}))
		return got.Status.State == a2agw.StateCompleted
	})
	if text(got.Artifacts[0].Parts) != "finished" {
		t.Fatalf("task %+v", got)
	}
}

// TestForeignPeerReplyIgnored: a reply to an agent's task from another peer (who learned
// the ask's id) does not complete it.
func TestForeignPeerReplyIgnored(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	eve := peer(t, m, "eve", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("x"), "configuration": map[string]any{"blocking": false}}))
	ask := clienttest.Receive(t, bob, 20*time.Second)
	gwp := protocol.Principal{Owner: "local", Actor: "a2a"}
	if _, err := eve.DM(t.Context(), gwp, client.Draft{Parts: []protocol.Part{protocol.TextPart("forged")}, ReplyTo: ask.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.DM(t.Context(), gwp, client.Draft{Parts: []protocol.Part{protocol.TextPart("[working] on it")}, ReplyTo: ask.ID}); err != nil {
		t.Fatal(err)
	}
	var got a2agw.Task
	meshtest.Until(t, "bob's progress", 20*time.Second, func() bool {
		got = task(t, call(t, g.srv.URL, "bob", "tasks/get", map[string]any{"id": tk.ID}))
		return got.Status.Message != nil
	})
	if got.Status.State != a2agw.StateWorking || text(got.Status.Message.Parts) != "on it" || len(got.Artifacts) != 0 {
		t.Fatalf("task %+v: eve's forged reply was taken", got)
	}
}

func TestGuard(t *testing.T) {
	m := mesh(t)
	peer(t, m, "bob", "")
	dir := t.TempDir()
	path := dir + "/tokens.json"
	tok, _, err := a2agw.MintToken(path, "ci", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, m, protocol.NewLifecycleUID(), func(c *a2agw.Config) { c.Bearer = a2agw.Bearer(path, time.Now) }, "bob")
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`
	do := func(host, origin, auth string) int {
		req, _ := http.NewRequest("POST", g.srv.URL+"/agents/bob", strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	u, _ := url.Parse(g.srv.URL)
	if s := do("evil.example:"+u.Port(), "", tok); s != http.StatusMisdirectedRequest {
		t.Fatalf("foreign Host: %d", s)
	}
	if s := do("", "http://evil.example", tok); s != http.StatusForbidden {
		t.Fatalf("cross-site Origin: %d", s)
	}
	if s := do("", "", ""); s != http.StatusUnauthorized {
		t.Fatalf("no token: %d", s)
	}
	if s := do("", "", tok+"x"); s != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", s)
	}
	if s := do("", "", tok); s != http.StatusOK {
		t.Fatalf("with the token: %d", s)
	}
	var card a2agw.AgentCard
	getJSON(t, g.srv.URL+"/agents/bob/.well-known/agent-card.json", &card)
	if card.SecuritySchemes["bearer"].Scheme != "bearer" || len(card.Security) != 1 {
		t.Fatalf("card declares no bearer scheme: %+v", card)
	}
}

func TestTokenFile(t *testing.T) {
	path := t.TempDir() + "/a2a/tokens.json"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tok, e, err := a2agw.MintToken(path, "ci", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b.data), tok) || !strings.Contains(string(b.data), e.SHA256) || b.mode != 0o600 {
		t.Fatalf("token file (mode %o): %s", b.mode, b.data)
	}
	f, _ := a2agw.ReadTokens(path)
	if !f.Valid(tok, now.Add(59*time.Minute)) || f.Valid(tok, now.Add(time.Hour)) || f.Valid("", now) || f.Valid(tok[:len(tok)-1], now) {
		t.Fatal("validity")
	}
}

// TestResubscribe: a caller that lost its stream resubscribes and sees the task settle.
func TestResubscribe(t *testing.T) {
	m := mesh(t)
	bob := peer(t, m, "bob", "")
	g := startGateway(t, m, protocol.NewLifecycleUID(), nil, "bob")
	tk := task(t, call(t, g.srv.URL, "bob", "message/send", map[string]any{"message": userMsg("job"),
		"configuration": map[string]any{"blocking": false}}))
	evs := stream(t, g.srv.URL, "bob", "tasks/resubscribe", map[string]any{"id": tk.ID})
	if first := <-evs; first["kind"] != "task" || first["id"] != tk.ID {
		t.Fatalf("first event %v", first)
	}
	answer(t, bob, "[input-required] which one?")
	var last map[string]any
	for ev := range evs {
		last = ev
	}
	if last["kind"] != "status-update" || last["final"] != true || last["status"].(map[string]any)["state"] != "input-required" {
		t.Fatalf("last event %v", last)
	}
	// Resubscribing to a settled task gives the task and ends.
	evs = stream(t, g.srv.URL, "bob", "tasks/resubscribe", map[string]any{"id": tk.ID})
	n := 0
	for range evs {
		n++
	}
	if n != 1 {
		t.Fatalf("a settled task's resubscribe sent %d events, want the task alone", n)
	}
}
