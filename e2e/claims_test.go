package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClaimToolsTypeScriptSDK drives the file-claim tools of the real `cotal mcp` on a
// real mesh (cotal up) with the official TypeScript MCP SDK client: claim, list, the
// roster's claims, release, and a call over the schema's bound refused.
func TestClaimToolsTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	sdk := mcpSDK(t)
	p := newProject(t)
	p.up()
	many := make([]string, 33)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i)
	}
	calls := []struct {
		tool  string
		args  map[string]any
		want  string
		isErr bool
	}{
		{"cotal_claim_paths", map[string]any{"paths": []string{"internal/cli"}, "ttl": 600, "reason": "split"}, "Claimed 1 path (exclusive)", false},
		{"cotal_claim_paths", map[string]any{"paths": []string{"internal/cli/x.go"}, "exclusive": false}, "Claimed 1 path (shared)", false},
		{"cotal_claims", map[string]any{}, `internal/cli: exclusive, held by you since `, false},
		{"cotal_claims", map[string]any{"path": "docs"}, "No claim overlaps docs.", false},
		{"cotal_roster", map[string]any{}, "claims internal/cli (exclusive), internal/cli/x.go (shared)", false},
		{"cotal_claim_paths", map[string]any{"paths": many}, "", true},
		{"cotal_claim_paths", map[string]any{"paths": []string{"../up"}}, "leaves the repository", true},
		{"cotal_release_paths", map[string]any{"all": true}, "Released 2 claims", false},
		{"cotal_claims", map[string]any{}, "No files are claimed.", false},
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
	var got []struct {
		Tool    string `json:"tool"`
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		var a struct {
			Tool    string `json:"tool"`
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		got = append(got, a)
	}
	if len(got) != len(calls)+1 {
		t.Fatalf("%d answers for %d calls:\n%s\n%s", len(got), len(calls)+1, out, stderr.String())
	}
	for i, c := range calls {
		a := got[i+1]
		if a.IsError != c.isErr || !strings.Contains(a.Text, c.want) {
			t.Errorf("%s %.80v: error %v, answer:\n%.500s", c.tool, c.args, a.IsError, a.Text)
		}
	}
}
