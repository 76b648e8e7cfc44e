package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestA2APeerJSSDK registers an agent served by the official JavaScript A2A SDK
// (@a2a-js/sdk, its v0.3 JSON-RPC) with the real cotal binary on a real mesh, bridges it,
// and talks to it from a person at cotal join: a DM becomes a task the bridge follows to
// its artifact, a task that asks back (input-required) is continued by the next DM, and
// cotal status lists the agent's skills.
func TestA2APeerJSSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	nm := a2aServerSDK(t)
	script, err := filepath.Abs(filepath.Join("testdata", "a2aagent.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	agent := exec.CommandContext(ctx, node, script, nm)
	agent.Stderr = os.Stderr
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithTest(agent)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	var hello struct{ URL string }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || json.Unmarshal([]byte(line), &hello) != nil || hello.URL == "" {
		t.Fatalf("the SDK agent said %q: %v", line, err)
	}

	p := newProject(t)
	p.up()
	reg := p.cotal("a2a", "add", "jsagent", hello.URL, "--role", "helpers")
	if !strings.Contains(reg, "registered jsagent on space main: JS SDK agent 0.0.1") || !strings.Contains(reg, "skills: Echo, Book a room") {
		t.Fatalf("add said %q", reg)
	}
	bridge := p.start("bridge", "a2a", "bridge")
	until(t, "the bridge ready", time.Minute, func() bool { return strings.Contains(bridge.text(), "a2a bridge ready on space main") })
	alice := p.start("alice", "join", "--name", "alice")
	until(t, "alice joined", time.Minute, func() bool { return strings.Contains(alice.text(), "joined space main") })
	until(t, "jsagent online", time.Minute, func() bool {
		s, err := p.try("status")
		return err == nil && strings.Contains(s, "jsagent") && strings.Contains(s, "runs a2a; skills Echo, Book a room")
	})

	alice.send("/dm jsagent hello there\n")
	until(t, "the echo artifact", time.Minute, func() bool { return strings.Contains(alice.text(), "[dm] jsagent: echo: hello there") })
	alice.send("/dm jsagent book a room\n")
	until(t, "the question", time.Minute, func() bool { return strings.Contains(alice.text(), "[dm] jsagent: which day?") })
	alice.send("/dm jsagent friday\n")
	until(t, "the booking", time.Minute, func() bool { return strings.Contains(alice.text(), "[dm] jsagent: booked for friday") })

	ls := p.cotal("a2a", "ls")
	if !strings.Contains(ls, "jsagent") || !strings.Contains(ls, "online") {
		t.Fatalf("ls said %q", ls)
	}
}

// a2aServerSDK finds the node_modules folder holding the official JavaScript A2A SDK and express
// ($COTAL_E2E_BIN/..; .ci/run installs them), or skips.
func a2aServerSDK(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvBin)
	if dir == "" {
		t.Skipf("$%s is not set: .ci/run installs the A2A JavaScript SDK beside the harnesses", EnvBin)
	}
	nm := filepath.Dir(dir)
	for _, f := range []string{"@a2a-js/sdk/dist/server/express/index.cjs", "express/package.json"} {
		if _, err := os.Stat(filepath.Join(nm, f)); err != nil {
			t.Skipf("the A2A JavaScript SDK is not installed in %s: %v", nm, err)
		}
	}
	return nm
}
