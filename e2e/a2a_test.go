package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// a2aSDK finds the official A2A JavaScript SDK beside the harnesses ($COTAL_E2E_BIN/..;
// .ci/run installs it), or skips.
func a2aSDK(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvBin)
	if dir == "" {
		t.Skipf("$%s is not set: .ci/run installs the A2A JavaScript SDK beside the harnesses", EnvBin)
	}
	sdk := filepath.Join(filepath.Dir(dir), "@a2a-js", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "dist", "client", "index.js")); err != nil {
		t.Skipf("the A2A JavaScript SDK is not installed in %s: %v", filepath.Dir(dir), err)
	}
	return sdk
}

// TestA2AJavaScriptSDK: the official A2A JavaScript SDK, as an outside agent, reads an
// exposed agent's card, sends a message and streams another through the gateway on a
// real authenticated mesh; the cotal agent answers each as a DM reply.
func TestA2AJavaScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	sdk := a2aSDK(t)
	const space = "main"
	m := meshtest.Start(t, space)
	m.Provision(space, provision.Options{})
	ctx := t.Context()
	join := func(name string, caps ...string) (*client.Endpoint, string) {
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}
		uid := protocol.NewLifecycleUID()
		if _, err := provision.Agent(ctx, m.Provisioner(space), space, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(m.Mint(space, trust.UserSpec{Name: name, Profile: trust.ProfileAgent, Principal: p,
			LifecycleUID: uid, Subscribe: []string{}, Capabilities: caps}))
		if err != nil {
			t.Fatal(err)
		}
		ep, err := client.Connect(ctx, m.URL, client.Config{Space: space, Name: name, LifecycleUID: uid, Description: name + " over A2A"}, c.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		if err := ep.Join(ctx); err != nil {
			t.Fatal(err)
		}
		return ep, uid
	}
	bob, _ := join("bob")
	gwEP, _ := join("a2a", trust.CapabilityA2AGateway)
	go func() { // bob answers every message: "[working]" first, then the result
		for in := range bob.Messages() {
			from, _ := protocol.ParsePrincipal(in.From.ID)
			for _, text := range []string{"[working] reading", "answer to " + in.Parts[0].Text} {
				if _, err := bob.DM(context.Background(), from, client.Draft{Parts: []protocol.Part{protocol.TextPart(text)}, ReplyTo: in.ID}); err != nil {
					return
				}
			}
			_ = in.Ack()
		}
	}()
	js, _ := jetstream.New(gwEP.Conn())
	kv, err := js.KeyValue(ctx, protocol.BucketA2A(space))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	g, err := a2agw.New(a2agw.Config{Endpoint: gwEP, Bucket: kv, Expose: []string{"agent:bob"}, BaseURL: base,
		Port: srv.Listener.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })

	nctx, ncancel := context.WithTimeout(ctx, 2*time.Minute) // a hang guard
	defer ncancel()
	cmd := exec.CommandContext(nctx, node, filepath.Join("testdata", "a2a_client.mjs"), sdk, base+"/agents/bob/")
	cmd.Stderr = &strings.Builder{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK client: %v\n%s\n%s", err, out, cmd.Stderr)
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var s map[string]any
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps[s["step"].(string)] = s
	}
	if s := steps["send"]; s == nil || s["state"] != "TASK_STATE_COMPLETED" || s["artifact"] != "answer to send: hello" {
		t.Fatalf("send: %v (all: %s)", s, out)
	}
	s := steps["stream"]
	if s == nil || s["last"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("stream: %v (all: %s)", s, out)
	}
	evs, _ := json.Marshal(s["events"])
	// The task comes first; the agent's answer follows as updates, or, when the reply
	// settled the task before the stream opened, inside that first task event.
	if !strings.HasPrefix(string(evs), `["task"`) || !strings.Contains(string(evs), `"artifact:answer to stream: hello"`) {
		t.Fatalf("stream events %s", evs)
	}
	if s := steps["get"]; s == nil || s["state"] != "TASK_STATE_COMPLETED" {
		t.Fatalf("get: %v", s)
	}
}
