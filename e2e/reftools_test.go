package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// refCall is one tool call as an agent written for the reference makes it (names and
// arguments from its tool-specs.ts), and a piece its answer must hold.
type refCall struct {
	tool string
	args map[string]any
	want string
}

// TestReferenceToolCalls drives the real `cotal mcp` on a real mesh (cotal up) with the
// official TypeScript MCP SDK client, calling each tool the reference added or extended
// with the reference's own arguments: every call is accepted and does what it says
// (the feedback report reaches a loopback intake).
func TestReferenceToolCalls(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	sdk := mcpSDK(t)
	var mu sync.Mutex
	var reports []map[string]any
	intake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		reports = append(reports, m)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":"fb-e2e"}`))
	}))
	t.Cleanup(intake.Close)

	p := newProject(t)
	p.up()
	p.setenv("COTAL_FEEDBACK_URL="+intake.URL, "COTAL_FEEDBACK_EMAIL=dev@example.test")
	calls := []refCall{
		{"cotal_docs", map[string]any{}, "agents:"},
		{"cotal_docs", map[string]any{"page": "mcp-tools", "refresh": true}, "cotal_channel_mode"},
		{"cotal_docs", map[string]any{"query": "attention"}, "[page "},
		{"cotal_status", map[string]any{"attention": "focus"}, "focus"},
		{"cotal_status", map[string]any{"status": "working", "activity": "reviewing"}, "working"},
		{"cotal_channel_mode", map[string]any{"channel": "general", "mode": "quiet"}, "general is now quiet"},
		{"cotal_send", map[string]any{"text": "hello", "channel": "general"}, "Posted to general"},
		{"cotal_inbox", map[string]any{"peek": true}, ""},
		{"cotal_reconnect", map[string]any{}, "Reconnected"},
		{"cotal_connection_status", map[string]any{}, "ready"},
		{"cotal_feedback", map[string]any{"origin": "agent", "type": "idea", "summary": "peek is handy", "area": "inbox"}, "fb-e2e"},
		{"cotal_status", map[string]any{}, "general quiet"},
	}
	pairs := make([][2]any, len(calls))
	for i, c := range calls {
		pairs[i] = [2]any{c.tool, c.args}
	}
	arg, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "reftools.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script, sdk, string(arg))
	cmd.Env, cmd.Dir = p.env, p.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK client: %v\n%s\n%s", err, out, stderr.String())
	}
	type answer struct {
		Tool    string `json:"tool"`
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	}
	var got []answer
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		got = append(got, a)
	}
	if len(got) != len(calls)+1 {
		t.Fatalf("%d answers for %d calls:\n%s\n%s", len(got), len(calls)+1, out, stderr.String())
	}
	for _, name := range []string{"cotal_docs", "cotal_channel_mode", "cotal_feedback", "cotal_reconnect"} {
		if !strings.Contains(","+got[0].Text+",", ","+name+",") {
			t.Errorf("tools/list lacks %s: %s", name, got[0].Text)
		}
	}
	for i, c := range calls {
		a := got[i+1]
		if a.IsError || !strings.Contains(a.Text, c.want) {
			t.Errorf("%s %v: error %v, answer:\n%.500s", c.tool, c.args, a.IsError, a.Text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || reports[0]["summary"] != "peek is handy" || reports[0]["email"] != "dev@example.test" {
		t.Errorf("the intake got %v", reports)
	}
}

// mcpSDK finds the official TypeScript MCP SDK in the node_modules folder the harnesses
// are installed in ($COTAL_E2E_BIN/..; .ci/run installs it), or skips.
func mcpSDK(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvBin)
	if dir == "" {
		t.Skipf("$%s is not set: .ci/run installs the MCP TypeScript SDK beside the harnesses", EnvBin)
	}
	sdk := filepath.Join(filepath.Dir(dir), "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "dist", "cjs", "client", "stdio.js")); err != nil {
		t.Skipf("the MCP TypeScript SDK is not installed in %s: %v", filepath.Dir(dir), err)
	}
	return sdk
}
