package agentmcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// refMesh is an open broker with space provisioned: the reference's tool calls are
// checked on it with the official Go MCP SDK client.
type refMesh struct{ url string }

func newRefMesh(t *testing.T) *refMesh {
	t.Helper()
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatal(err)
	}
	return &refMesh{url: srv.ClientURL()}
}

// peer is a plain endpoint named name, joined to channels.
func (rm *refMesh) peer(t *testing.T, name string, channels ...string) *client.Endpoint {
	t.Helper()
	ep, err := client.Connect(t.Context(), rm.url, client.Config{Space: space, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(t.Context(), channels...); err != nil {
		t.Fatal(err)
	}
	return ep
}

// session runs name's agentmcp.Server (configured by cfg) joined to channels and
// returns the model's session, the wake-ups it is pushed and the agent's endpoint.
func (rm *refMesh) session(t *testing.T, name string, channels []string, cfg func(*agentmcp.Server)) (*mcp.ClientSession, chan json.RawMessage, *client.Endpoint) {
	t.Helper()
	ep, err := client.Connect(t.Context(), rm.url, client.Config{Space: space, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Channels: channels, Channel: true, Ready: func() { close(ready) }}
	if cfg != nil {
		cfg(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	t.Cleanup(func() { cancel(); <-done; _ = ep.Close() })
	caps := &mcp.ClientCapabilities{Experimental: map[string]any{agentmcp.ChannelCapability: map[string]any{}}}
	got := make(chan json.RawMessage, 64)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).
		Connect(t.Context(), channelTap{ct, got}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("%s's server ended: %v", name, err)
	case <-t.Context().Done():
	}
	return cs, got, ep
}

// mustCall calls tool and fails the test when it is refused or errs.
func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	out, isErr := call(t, cs, tool, args)
	if isErr {
		t.Fatalf("%s %v: %s", tool, args, out)
	}
	return out
}

// nextWake waits for the next wake-up pushed to the model.
func nextWake(t *testing.T, got chan json.RawMessage) agentmcp.ChannelParams {
	t.Helper()
	select {
	case raw := <-got:
		var p agentmcp.ChannelParams
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	case <-time.After(textHang):
		t.Fatal("no wake-up")
	}
	return agentmcp.ChannelParams{}
}

// cotal_inbox {peek: true} shows the window and clears nothing: twice the same window,
// then a plain read takes it, then peek finds the inbox empty.
func TestInboxPeekClearsNothing(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, _ := rm.session(t, "alice", []string{"general"}, nil)
	bob := rm.peer(t, "bob")
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, client.Text("peek at me")); err != nil {
		t.Fatal(err)
	}
	var first string
	meshtest.Until(t, "the DM shows under peek", textHang, func() bool {
		first = mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true})
		return strings.Contains(first, "peek at me")
	})
	if again := mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true}); !strings.Contains(again, "peek at me") || !strings.Contains(again, "nothing cleared") {
		t.Fatalf("a second peek lost the message:\n%s", again)
	}
	if took := mustCall(t, alice, "cotal_inbox", map[string]any{}); !strings.Contains(took, "peek at me") {
		t.Fatalf("the read after two peeks:\n%s", took)
	}
	if after := mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true}); strings.Contains(after, "peek at me") {
		t.Fatalf("peek after the read still shows it:\n%s", after)
	}
}

// cotal_status {attention: dnd}: an untagged channel post no longer wakes the model (it
// waits in the inbox), a direct message and a post mentioning it still do, and peers read
// the mode in its presence.
func TestAttentionDNDKeepsChannelPostsFromWaking(t *testing.T) {
	rm := newRefMesh(t)
	alice, wakes, _ := rm.session(t, "alice", []string{"general"}, nil)
	bob := rm.peer(t, "bob", "general")
	if out := mustCall(t, alice, "cotal_status", map[string]any{"attention": "dnd"}); !strings.Contains(out, "dnd") {
		t.Fatalf("cotal_status attention dnd: %s", out)
	}
	meshtest.Until(t, "alice's presence says dnd", textHang, func() bool {
		peers, err := bob.Roster(t.Context())
		return err == nil && func() bool {
			for _, p := range peers {
				if p.Card.Name == "alice" {
					return p.Attention == protocol.AttentionDND
				}
			}
			return false
		}()
	})
	if _, err := bob.Post(t.Context(), "general", client.Text("chatter")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the post is held", textHang, func() bool {
		return strings.Contains(mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true}), "chatter")
	})
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, client.Text("direct")); err != nil {
		t.Fatal(err)
	}
	w := nextWake(t, wakes)
	if w.Meta["kind"] != "dm" || w.Meta["count"] != "1" {
		t.Fatalf("under dnd the wake-up named %v (%s), want only the direct message", w.Meta, w.Content)
	}
	mustCall(t, alice, "cotal_inbox", map[string]any{}) // answers the wake-up
	d := client.Text("@alice look")
	d.Mentions = []string{"alice"}
	if _, err := bob.Post(t.Context(), "general", d); err != nil {
		t.Fatal(err)
	}
	if w := nextWake(t, wakes); w.Meta["kind"] != "channel" || w.Meta["count"] != "1" {
		t.Fatalf("a post mentioning alice under dnd: wake-up %v", w.Meta)
	}
}

// cotal_channel_mode: quiet keeps a channel's posts from waking the model; muted stops
// receiving them (a mention too); peers read the modes in its presence.
func TestChannelModeQuietAndMuted(t *testing.T) {
	rm := newRefMesh(t)
	alice, wakes, _ := rm.session(t, "alice", []string{"general", "team"}, nil)
	bob := rm.peer(t, "bob")
	dm := func(text string) {
		if _, err := bob.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, client.Text(text)); err != nil {
			t.Fatal(err)
		}
	}
	if out, isErr := call(t, alice, "cotal_channel_mode", map[string]any{"channel": "elsewhere", "mode": "quiet"}); !isErr || !strings.Contains(out, "cotal_join") {
		t.Fatalf("a channel alice does not read: %v %s", isErr, out)
	}
	mustCall(t, alice, "cotal_channel_mode", map[string]any{"channel": "team", "mode": "quiet"})
	mustCall(t, alice, "cotal_channel_mode", map[string]any{"channel": "general", "mode": "muted"})
	meshtest.Until(t, "alice's presence carries her channel modes", textHang, func() bool {
		peers, _ := bob.Roster(t.Context())
		for _, p := range peers {
			if p.Card.Name == "alice" {
				return p.ChannelModes["general"] == "muted" && p.ChannelModes["team"] == "quiet"
			}
		}
		return false
	})
	m := client.Text("@alice muted mention")
	m.Mentions = []string{"alice"}
	if _, err := bob.Post(t.Context(), "general", m); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Post(t.Context(), "team", client.Text("quiet chatter")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the quiet post is held", textHang, func() bool {
		return strings.Contains(mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true}), "quiet chatter")
	})
	dm("ping")
	if w := nextWake(t, wakes); w.Meta["kind"] != "dm" || w.Meta["count"] != "1" {
		t.Fatalf("with team quiet and general muted the wake-up named %v (%s)", w.Meta, w.Content)
	}
	got := mustCall(t, alice, "cotal_inbox", map[string]any{})
	if !strings.Contains(got, "quiet chatter") || !strings.Contains(got, "ping") || strings.Contains(got, "muted mention") {
		t.Fatalf("inbox with team quiet, general muted:\n%s", got)
	}
	st := mustCall(t, alice, "cotal_status", map[string]any{})
	if !strings.Contains(st, "general muted") || !strings.Contains(st, "team quiet") {
		t.Fatalf("cotal_status does not show the channel modes:\n%s", st)
	}
}

// cotal_reconnect drops and re-dials the connection; a message sent afterwards arrives.
func TestReconnectRedials(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, ep := rm.session(t, "alice", []string{"general"}, nil)
	before := ep.Conn().Stats().Reconnects
	if out := mustCall(t, alice, "cotal_reconnect", map[string]any{}); !strings.Contains(out, "Reconnected") {
		t.Fatalf("cotal_reconnect: %s", out)
	}
	if ep.Conn().Stats().Reconnects <= before {
		t.Fatal("cotal_reconnect did not re-dial")
	}
	bob := rm.peer(t, "bob")
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, client.Text("after")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "a DM after the reconnect arrives", textHang, func() bool {
		return strings.Contains(mustCall(t, alice, "cotal_inbox", map[string]any{"peek": true}), "after")
	})
}

// cotal_docs serves the pages built into the binary: the index, a page (by the
// reference's name too), a search.
func TestDocsServesBuiltInPages(t *testing.T) {
	rm := newRefMesh(t)
	alice, _, _ := rm.session(t, "alice", nil, nil)
	if idx := mustCall(t, alice, "cotal_docs", map[string]any{}); !strings.Contains(idx, "agents:") || !strings.Contains(idx, "interop:") {
		t.Fatalf("index:\n%s", idx)
	}
	page := mustCall(t, alice, "cotal_docs", map[string]any{"page": "mcp-tools", "refresh": true})
	if !strings.Contains(page, "cotal_channel_mode") || !strings.Contains(page, "refresh") {
		t.Fatalf("page mcp-tools:\n%.400s", page)
	}
	if hit := mustCall(t, alice, "cotal_docs", map[string]any{"query": "cotal_reconnect"}); !strings.Contains(hit, "[page agents]") {
		t.Fatalf("query:\n%.600s", hit)
	}
	if out, isErr := call(t, alice, "cotal_docs", map[string]any{"page": "../go.mod"}); !isErr || !strings.Contains(out, "no docs page") {
		t.Fatalf("a path for page: %v %s", isErr, out)
	}
}

// cotal_feedback posts the report to the configured intake, with the key as a bearer;
// without a key it needs a contact email.
func TestFeedbackGoesToTheIntake(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	var auth []string
	intake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got, auth = append(got, m), append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":"fb-42"}`))
	}))
	t.Cleanup(intake.Close)
	rm := newRefMesh(t)
	fb := &agentmcp.Feedback{URL: intake.URL, Key: "k-1"}
	alice, _, _ := rm.session(t, "alice", nil, func(s *agentmcp.Server) { s.Feedback = fb })
	args := map[string]any{"origin": "agent", "type": "bug", "summary": "inbox lost a DM", "severity": "high", "area": "inbox"}
	if out := mustCall(t, alice, "cotal_feedback", args); !strings.Contains(out, "fb-42") {
		t.Fatalf("cotal_feedback: %s", out)
	}
	fb.Key = ""
	if out, isErr := call(t, alice, "cotal_feedback", args); !isErr || !strings.Contains(out, "email") {
		t.Fatalf("keyless without email: %v %s", isErr, out)
	}
	args["email"] = "dev@example.test"
	mustCall(t, alice, "cotal_feedback", args)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || auth[0] != "Bearer k-1" || auth[1] != "" {
		t.Fatalf("intake got %d reports, auth %q", len(got), auth)
	}
	if got[0]["summary"] != "inbox lost a DM" || got[0]["origin"] != "agent" || got[0]["source"] != "cotal-mcp" || got[0]["email"] != nil {
		t.Fatalf("keyed report %v", got[0])
	}
	if got[1]["email"] != "dev@example.test" {
		t.Fatalf("keyless report %v", got[1])
	}
}

// fakeManager answers the manager rail of space on nc as the manager would, recording
// every request (op and body).
type fakeManager struct {
	mu   sync.Mutex
	reqs []string
}

func (f *fakeManager) serve(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe(protocol.Root+"."+space+".ctl.>", func(m *nats.Msg) {
		_, _, op, ok := protocol.ParseMgrSubject(space, m.Subject)
		if !ok {
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, op+" "+string(m.Data))
		f.mu.Unlock()
		var data any = map[string]any{}
		switch op {
		case protocol.MgrSpawn:
			data = protocol.SpawnResult{Name: "helper", Persona: "helper", Agent: "claude", UID: "u1", WindowMs: 1000}
		case protocol.MgrStop:
			data = protocol.SeatInfo{Name: "helper", Process: "exited"}
		case protocol.MgrPs:
			data = protocol.PsResult{}
		}
		b, _ := json.Marshal(data)
		r, _ := json.Marshal(protocol.MgrReply{OK: true, Data: b})
		_ = m.Respond(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeManager) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

// managerSession is alice with the manager tools, asking on nc's manager rail.
func managerSession(t *testing.T, rm *refMesh) *mcp.ClientSession {
	t.Helper()
	cs, _, _ := rm.session(t, "alice", []string{"general"}, func(s *agentmcp.Server) {
		s.Manager = &agentmcp.Manager{Client: &mgrclient.Client{NC: s.Endpoint.Conn(), Space: space, Caller: s.Endpoint.Principal()},
			Grant: &workspace.Grant{Capabilities: []string{trust.CapabilitySpawn}}}
		s.Turns = &mgrclient.Client{NC: s.Endpoint.Conn(), Space: space, Caller: s.Endpoint.Principal()}
	})
	return cs
}

// The attack: a spawn asking, through launchOptions, cwd or variant, for a flag, a
// program, an environment, a folder. Each is refused by name and no request reaches the
// manager's rail; the plain spawn that follows is the first request it sees, and
// despawn graceful:false asks for the hard stop.
func TestSpawnLaunchOptionsNeverReachTheManager(t *testing.T) {
	rm := newRefMesh(t)
	mgrConn, err := nats.Connect(rm.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgrConn.Close)
	mgr := &fakeManager{}
	mgr.serve(t, mgrConn)
	alice := managerSession(t, rm)
	for _, c := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"name": "helper", "launchOptions": map[string]any{"--dangerously-skip-permissions": true, "command": "/bin/sh", "env": map[string]any{"PATH": "/tmp"}}},
			[]string{`"--dangerously-skip-permissions"`, `"command"`, `"env"`, "launchOptions"}},
		{map[string]any{"name": "helper", "launchOptions": map[string]any{"model": "opus"}}, []string{`"model"`}},
		{map[string]any{"name": "helper", "cwd": "/etc"}, []string{"cwd", "/etc"}},
		{map[string]any{"name": "helper", "variant": "max"}, []string{"variant", "max"}},
	} {
		out, isErr := call(t, alice, "cotal_spawn", c.args)
		if !isErr {
			t.Fatalf("cotal_spawn %v was accepted: %s", c.args, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("cotal_spawn %v: refusal %q does not name %s", c.args, out, w)
			}
		}
	}
	mustCall(t, alice, "cotal_spawn", map[string]any{"name": "helper", "launchOptions": map[string]any{}, "events": false})
	mustCall(t, alice, "cotal_despawn", map[string]any{"name": "helper", "graceful": false})
	mustCall(t, alice, "cotal_despawn", map[string]any{"name": "helper"})
	var ops []string
	for _, r := range mgr.requests() {
		if !strings.HasPrefix(r, protocol.MgrPs+" ") { // the tools' own probe at start
			ops = append(ops, r)
		}
	}
	if len(ops) != 3 || !strings.HasPrefix(ops[0], "spawn ") || strings.Contains(ops[0], "/bin/sh") ||
		!strings.Contains(ops[1], `"force":true`) || strings.Contains(ops[2], "force") {
		t.Fatalf("the manager saw %q; want the plain spawn, a forced stop, then a graceful stop", ops)
	}
}

// cotal_persona {announce}: a bad channel is refused before anything is written; a good
// one saves the persona and posts one note naming it on that channel; without announce
// nothing is posted.
func TestPersonaAnnounce(t *testing.T) {
	rm := newRefMesh(t)
	proj, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mgrConn, err := nats.Connect(rm.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgrConn.Close)
	(&fakeManager{}).serve(t, mgrConn) // answers the tools' probe at start
	alice, _, _ := rm.session(t, "alice", []string{"general"}, func(s *agentmcp.Server) {
		s.Manager = &agentmcp.Manager{Client: &mgrclient.Client{NC: s.Endpoint.Conn(), Space: space, Caller: s.Endpoint.Principal()},
			Project: proj, Grant: &workspace.Grant{Read: []string{">"}, Publish: []string{">"}, Capabilities: []string{trust.CapabilitySpawn}}}
	})
	bob := rm.peer(t, "bob", "team")
	if out, isErr := call(t, alice, "cotal_persona", map[string]any{"name": "critic", "prompt": "You review.", "announce": "team.>"}); !isErr || !strings.Contains(out, "nothing was written") {
		t.Fatalf("announce on a wildcard: %v %s", isErr, out)
	}
	if _, err := proj.Persona("critic"); err == nil {
		t.Fatal("a refused announce still wrote the persona")
	}
	mustCall(t, alice, "cotal_persona", map[string]any{"name": "quiet", "prompt": "You stay quiet."})
	out := mustCall(t, alice, "cotal_persona", map[string]any{"name": "critic", "prompt": "You review.", "announce": "team"})
	if !strings.Contains(out, "announced it on team") {
		t.Fatalf("cotal_persona announce: %s", out)
	}
	var in *client.Incoming
	select {
	case in = <-bob.Messages():
	case <-time.After(textHang):
		t.Fatal("no note on team")
	}
	if in.Subject.Channel != "team" || !strings.Contains(in.Text(), "critic") || in.Subject.Sender.Actor != "alice" {
		t.Fatalf("the note: %s on %s from %s", in.Text(), in.Subject.Channel, in.Subject.Sender)
	}
	if _, err := proj.Persona("critic"); err != nil {
		t.Fatalf("the announced persona was not saved: %v", err)
	}
}
