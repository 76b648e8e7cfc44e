package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTeamToolCalls drives the real `cotal mcp` of two agents on a real mesh (cotal up)
// with the official TypeScript MCP SDK client: a thread of five replies comes back in
// order, cotal_wait returns what arrives and, longer than the client's request timeout,
// survives on progress notifications; search finds a reply by a word; peek leaves a DM and
// cotal_ack settles it.
func TestTeamToolCalls(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	sdk := mcpSDK(t)
	p := newProject(t)
	p.up()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "teamtools.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script, sdk)
	cmd.Env, cmd.Dir = p.env, p.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the SDK client: %v\n%s\n%s", err, out, stderr.String())
	}
	var res struct {
		Failures []string `json:"failures"`
		Progress int      `json:"progress"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
	if res.Progress < 1 {
		t.Errorf("the long cotal_wait sent no progress notification")
	}
}
