package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// authMesh is the default mesh `cotal up` starts in a project: authenticated, agents on
// minted credentials. js reads it as the provisioner.
type authMesh struct {
	dir string
	env []string
	js  jetstream.JetStream
}

func defaultMesh(t *testing.T) *authMesh {
	t.Helper()
	dir := t.TempDir()
	m := &authMesh{dir: dir, env: []string{"HOME=" + dir, "COTAL_HOME=" + filepath.Join(dir, ".cotal-home"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"), "PATH=" + os.Getenv("PATH")}}
	m.cotal(t, "up", "--detach", "--server", "nats://127.0.0.1:0", "--space", space)
	t.Cleanup(func() { m.cotal(t, "down") })
	var rec struct {
		Server string `json:"server"`
	}
	b, err := os.ReadFile(filepath.Join(dir, ".cotal", "mesh.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	chain, err := trust.Open(filepath.Join(dir, ".cotal", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := acct.Mint(trust.UserSpec{Name: "test-provisioner", Profile: trust.ProfileProvisioner})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := trust.ReadCreds(raw)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(rec.Server, creds.Options()...)
	if err != nil {
		t.Fatalf("connect as provisioner: %v", err)
	}
	t.Cleanup(nc.Close)
	if m.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return m
}

// cotal runs the cotal binary in the project and returns its output.
func (m *authMesh) cotal(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = m.dir, m.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cotal %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// agent starts `cotal mcp args...` in the project.
func (m *authMesh) agent(t *testing.T, caps *sdk.ClientCapabilities, env []string, args ...string) *agent {
	t.Helper()
	return startAgentIn(t, m.dir, caps, append(append([]string{}, m.env...), env...), args...)
}

// unread waits until the agent's server holds n messages not yet given to the model.
func (a *agent) unread(t *testing.T, n int) {
	t.Helper()
	meshtest.Until(t, fmt.Sprintf("%d held", n), 40*time.Second, func() bool {
		var o struct {
			Unread int `json:"unread"`
		}
		a.ok(t, "cotal_orientation", nil, &o)
		return o.Unread == n
	})
}

// drain reads the inbox until want messages came or the deadline passes, and then once
// more, so a second copy would show.
func (a *agent) drain(t *testing.T, want int, within time.Duration) []agentmcp.Item {
	t.Helper()
	var got []agentmcp.Item
	deadline := time.Now().Add(within)
	for len(got) < want && time.Now().Before(deadline) {
		var o inboxOut
		a.ok(t, "cotal_inbox", nil, &o)
		got = append(got, o.Messages...)
		if len(o.Messages) == 0 {
			time.Sleep(100 * time.Millisecond) // polling the inbox tool; the deadline bounds it
		}
	}
	var o inboxOut
	a.ok(t, "cotal_inbox", nil, &o)
	return append(got, o.Messages...)
}

// A DM the server holds but the model has not read survives every way `cotal mcp` ends
// on the default mesh: a clean exit (stdin closed, SIGTERM) hands it back, a SIGKILL
// leaves it to come back within the DM ack wait. The next session gets it once. For the
// clean exits the durable's ack wait is made far longer than the test waits, so a DM
// that comes back at all was handed back.
func TestUnreadDMSurvivesEveryExitOnTheDefaultMesh(t *testing.T) {
	m := defaultMesh(t)
	ada := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ada"}
	for _, exit := range []string{"stdin", "sigterm", "sigkill"} {
		t.Run(exit, func(t *testing.T) {
			a := m.agent(t, nil, nil, "--name", "ada")
			within := provision.AckWait + 20*time.Second // a crash's copy waits out the ack wait
			if exit != "sigkill" {
				m.dmAckWait(t, ada, handedBackOnly)
				within = handBackDeadline
			}
			text := "unread before " + exit
			m.cotal(t, "send", "dm", "ada", text)
			a.unread(t, 1)
			switch exit {
			case "stdin":
				if err := a.session.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				if code := a.cmd.ProcessState.ExitCode(); code != 0 {
					t.Fatalf("cotal mcp exited %d on stdin close\n%s", code, a.stderr)
				}
			case "sigterm", "sigkill":
				sig := map[string]syscall.Signal{"sigterm": syscall.SIGTERM, "sigkill": syscall.SIGKILL}[exit]
				if err := a.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				_ = a.session.Wait() // the server's stdout closes as it exits
				_ = a.session.Close()
				if exit == "sigterm" && a.cmd.ProcessState.ExitCode() != 0 {
					t.Fatalf("cotal mcp exited %d on SIGTERM\n%s", a.cmd.ProcessState.ExitCode(), a.stderr)
				}
			}
			if n := pendingDM(t, m.js, ada); n != 1 {
				t.Fatalf("after %s the dm is not on the broker (%d pending): it was acked unread", exit, n)
			}
			b := m.agent(t, nil, nil, "--name", "ada")
			got := b.drain(t, 1, within)
			if len(got) != 1 || got[0].Text != text {
				t.Fatalf("after %s the next session got %+v, want %q once (a clean exit hands it back)", exit, got, text)
			}
			meshtest.Until(t, "the dm acked", 20*time.Second, func() bool { return pendingDM(t, m.js, ada) == 0 })
			if err := b.session.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// handedBackOnly is an ack wait far longer than any test waits: a copy delivered under it
// comes back within a test only when it was handed back (naked). handBackDeadline is how
// long a test waits for a handed-back copy.
const (
	handedBackOnly   = time.Hour
	handBackDeadline = 30 * time.Second
)

// dmAckWait sets the ack wait of p's DM durables to d until the (sub)test ends, then puts
// the documented one back.
func (m *authMesh) dmAckWait(t *testing.T, p protocol.Principal, d time.Duration) {
	t.Helper()
	set := func(d time.Duration) error {
		stream, err := m.js.Stream(context.Background(), protocol.StreamDM(space))
		if err != nil {
			return err
		}
		names := stream.ConsumerNames(context.Background())
		found := 0
		for name := range names.Name() {
			if !strings.HasPrefix(name, protocol.ConsumerDMPrefix(p)) {
				continue
			}
			c, err := stream.Consumer(context.Background(), name)
			if err != nil {
				return err
			}
			cfg := c.CachedInfo().Config
			cfg.AckWait = d
			if _, err := m.js.UpdateConsumer(context.Background(), protocol.StreamDM(space), cfg); err != nil {
				return fmt.Errorf("ack wait of %s: %w", name, err)
			}
			found++
		}
		if err := names.Err(); err != nil {
			return err
		}
		if found == 0 {
			return fmt.Errorf("no DM durable of %s", p)
		}
		return nil
	}
	if err := set(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(provision.AckWait); err != nil {
			t.Errorf("put the ack wait back: %v", err)
		}
	})
}

// The DM durable an agent's credential binds on the default mesh has the ack wait the docs
// give, so a crashed agent's held DM comes back within it.
func TestDefaultMeshDMDurableHasTheDocumentedAckWait(t *testing.T) {
	m := defaultMesh(t)
	a := m.agent(t, nil, nil, "--name", "ada")
	a.ok(t, "cotal_orientation", nil, nil)
	stream, err := m.js.Stream(t.Context(), protocol.StreamDM(space))
	if err != nil {
		t.Fatal(err)
	}
	prefix := protocol.ConsumerDMPrefix(protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ada"})
	found := 0
	for name := range stream.ConsumerNames(t.Context()).Name() {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		c, err := stream.Consumer(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		found++
		if got := c.CachedInfo().Config.AckWait; got != provision.AckWait {
			t.Errorf("%s: ack wait %s, want %s", name, got, provision.AckWait)
		}
	}
	if found == 0 {
		t.Fatal("no DM durable of ada")
	}
}

// On the default mesh an agent DMs a peer whose presence record has expired (offline past
// the presence TTL) by name and by id, and an unknown name is refused.
func TestAgentDMsAPeerOfflinePastThePresenceTTL(t *testing.T) {
	m := defaultMesh(t)
	bob := m.agent(t, nil, nil, "--name", "bob")
	bob.ok(t, "cotal_orientation", nil, nil)
	ada := m.agent(t, nil, nil, "--name", "ada")
	if err := bob.session.Close(); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "bob gone from the roster", 40*time.Second, func() bool {
		var r struct {
			Peers []agentmcp.PeerInfo `json:"peers"`
		}
		ada.ok(t, "cotal_roster", nil, &r)
		for _, p := range r.Peers {
			if p.Name == "bob" {
				return false
			}
		}
		return true
	})
	for _, to := range []string{"bob", "local.bob"} {
		res := ada.call(t, "cotal_dm", map[string]any{"to": to, "text": "for " + to})
		if res.IsError {
			t.Fatalf("cotal_dm to %s: %s", to, resultText(res))
		}
	}
	res := ada.call(t, "cotal_dm", map[string]any{"to": "nobody", "text": "lost"})
	if !res.IsError || !strings.Contains(resultText(res), "unknown peer") {
		t.Fatalf("cotal_dm to an unknown name: %s (error %v), want unknown peer", resultText(res), res.IsError)
	}
	back := m.agent(t, nil, nil, "--name", "bob")
	got := back.drain(t, 2, 30*time.Second)
	if len(got) != 2 || got[0].Text != "for bob" || got[1].Text != "for local.bob" {
		t.Fatalf("bob got %+v, want both DMs once", got)
	}
}

// A cotal_inbox result the client never reads (it closed its end of stdout) acks
// nothing: the window comes back to the next session.
func TestInboxWindowIsAckedOnlyOnceWritten(t *testing.T) {
	m := defaultMesh(t)
	cmd := exec.Command(binary, "mcp", "--name", "ada")
	cmd.Dir, cmd.Env = m.dir, m.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("cotal mcp stderr:\n%s", stderr)
		}
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	send := func(frame string) {
		t.Helper()
		if _, err := io.WriteString(stdin, frame+"\n"); err != nil {
			t.Fatalf("write %s: %v", frame, err)
		}
	}
	answer := func(id int) string {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), fmt.Sprintf(`"id":%d`, id)) {
				return lines.Text()
			}
		}
		t.Fatalf("no answer %d: %v\n%s", id, lines.Err(), stderr)
		return ""
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	answer(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	m.cotal(t, "send", "dm", "ada", "read me once")
	for id := 2; ; id++ {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"cotal_orientation","arguments":{}}}`, id))
		if strings.Contains(answer(id), `"unread":1`) {
			break
		}
		if id > 400 {
			t.Fatal("the dm never reached the server")
		}
		time.Sleep(100 * time.Millisecond) // polling orientation over raw stdio
	}
	// The client is gone for reading: the result of this call cannot reach it.
	if err := stdout.Close(); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","id":9999,"method":"tools/call","params":{"name":"cotal_inbox","arguments":{}}}`)
	_ = stdin.Close()
	_ = cmd.Wait()
	b := m.agent(t, nil, nil, "--name", "ada")
	got := b.drain(t, 1, provision.AckWait+20*time.Second)
	if len(got) != 1 || got[0].Text != "read me once" {
		t.Fatalf("the next session got %+v: the unread window was acked", got)
	}
}

// With COTAL_CHANNEL=1 (how Claude Code is launched) the server offers only revisions
// with a path for unsolicited notifications, so a client that would pick the modern one
// (the official SDK, like Claude Code) negotiates a legacy one and gets the wake-up; a
// session on the modern revision is never pushed to, and its DM stays in the inbox.
func TestPushOnlyWhereTheRevisionDeliversIt(t *testing.T) {
	url, js := mesh(t)
	bob := peer(t, url, client.Config{Name: "bob"})
	caps := &sdk.ClientCapabilities{Experimental: map[string]any{agentmcp.ChannelCapability: map[string]any{}}}

	pushed := startAgent(t, url, nil, []string{"COTAL_CHANNEL=1"}, "--name", "pushed")
	if v := pushed.session.InitializeResult().ProtocolVersion; v >= agentmcp.ModernRevision {
		t.Fatalf("with COTAL_CHANNEL=1 the session negotiated %s, which has no path for a push", v)
	}
	waitOnline(t, bob, "pushed")
	if _, err := bob.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "pushed"}, client.Text("pushed to you")); err != nil {
		t.Fatal(err)
	}
	if p := wakeUp(t, pushed); !strings.Contains(p.Content, "a direct message from bob") {
		t.Fatalf("wake-up %+v on the legacy session", p)
	}

	modern := startAgent(t, url, caps, nil, "--name", "modern")
	if v := modern.session.InitializeResult().ProtocolVersion; v < agentmcp.ModernRevision {
		t.Skipf("the SDK client negotiated %s; this case needs the modern revision", v)
	}
	waitOnline(t, bob, "modern")
	modernP := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "modern"}
	if _, err := bob.DM(t.Context(), modernP, client.Text("not pushable")); err != nil {
		t.Fatal(err)
	}
	modern.unread(t, 1)
	select {
	case raw := <-modern.channel:
		t.Fatalf("a modern session was pushed %s", raw)
	default:
	}
	if n := pendingDM(t, js, modernP); n != 1 {
		t.Fatalf("%d pending on modern's durable before it read its inbox, want 1", n)
	}
	var o inboxOut
	modern.ok(t, "cotal_inbox", nil, &o)
	if len(o.Messages) != 1 || o.Messages[0].Text != "not pushable" {
		t.Fatalf("inbox %+v", o.Messages)
	}
}

// A DM a channel client was woken for, but never read with cotal_inbox, is not lost when
// the client goes (stdin closes): a wake-up acks nothing (MCP confirms no notification,
// and Claude Code drops it where its channels are off), so the next session gets the DM
// once.
func TestWokenButUnreadDMSurvivesTheSession(t *testing.T) {
	m := defaultMesh(t)
	ada := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ada"}
	caps := &sdk.ClientCapabilities{Experimental: map[string]any{agentmcp.ChannelCapability: map[string]any{}}}
	a := m.agent(t, caps, []string{"COTAL_CHANNEL=1"}, "--name", "ada")
	a.ok(t, "cotal_orientation", nil, nil)
	m.dmAckWait(t, ada, handedBackOnly) // a DM that comes back within the test was handed back
	m.cotal(t, "send", "dm", "ada", "woken, never read")
	wakeUp(t, a) // the client got the push, and never calls cotal_inbox
	if err := a.session.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := pendingDM(t, m.js, ada); n != 1 {
		t.Fatalf("after the session closed %d DMs pending, want 1: the push acked a DM the agent never read", n)
	}
	b := m.agent(t, nil, nil, "--name", "ada")
	got := b.drain(t, 1, handBackDeadline)
	if len(got) != 1 || got[0].Text != "woken, never read" {
		t.Fatalf("the next session got %+v, want the DM once, handed back", got)
	}
}
