package cli_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// claimTTL is the ttl of the claim the killed agent holds: long enough that the claims
// made right after the kill come before it ends on a loaded machine.
const claimTTL = 20 * time.Second

// cmdClaimKill runs two real `cotal mcp` agents, A and B, on the script's mesh. A claims
// docs (for ten minutes) and src (for claimTTL) with a reason, and is killed with SIGKILL.
// B's claim of a file in src is then refused, naming A; B claims it again until it is
// granted. It prints, for the script to check:
//
//	A: <cotal_claim_paths text of src>
//	roster: <A's line in B's cotal_roster>
//	B conflict: <B's refused claim>
//	B granted after the ttl|before the ttl
//
//	claimkill A B
func cmdClaimKill(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: claimkill A B")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	out := ts.Stdout()
	a, err := startMCP(ctx, ts, "--name", args[0])
	if err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	defer func() { _ = a.session.Close() }()
	b, err := startMCP(ctx, ts, "--name", args[1])
	if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	defer func() { _ = b.session.Close() }()
	a.call(ctx, "cotal_claim_paths", map[string]any{"paths": []string{"docs"}, "ttl": 600, "reason": "rewriting the guide"})
	claimed := time.Now()
	fmt.Fprintln(out, "A:", a.call(ctx, "cotal_claim_paths", map[string]any{"paths": []string{"src"}, "ttl": int(claimTTL.Seconds()), "reason": "editing src"}))
	for _, l := range strings.Split(b.callLines(ctx, "cotal_roster"), "\n") {
		if strings.HasPrefix(l, args[0]+" ") {
			fmt.Fprintln(out, "roster:", l)
		}
	}
	if err := a.cmd.Process.Kill(); err != nil {
		ts.Fatalf("kill %s: %v", args[0], err)
	}
	_ = a.session.Close() // reaps the killed process
	claim := map[string]any{"paths": []string{"src/main.go"}, "exclusive": true, "reason": "fix"}
	fmt.Fprintln(out, "B conflict:", b.call(ctx, "cotal_claim_paths", claim))
	for {
		got := b.call(ctx, "cotal_claim_paths", claim)
		if strings.HasPrefix(got, "Claimed 1 path") {
			break
		}
		if !strings.HasPrefix(got, "Nothing was claimed") || ctx.Err() != nil {
			ts.Fatalf("B's claim: %s", got)
		}
		time.Sleep(200 * time.Millisecond) // the re-check interval of a poll, not a wait for time to pass
	}
	if time.Since(claimed) >= claimTTL {
		fmt.Fprintln(out, "B granted after the ttl")
	} else {
		fmt.Fprintln(out, "B granted before the ttl")
	}
}

// callLines calls a tool with no arguments and returns its text with its line breaks.
func (p *mcpProc) callLines(ctx context.Context, tool string) string {
	res, err := p.session.CallTool(ctx, &mcpCallParams{Name: tool})
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcpText); ok {
			out = append(out, t.Text)
		}
	}
	return strings.Join(out, "\n")
}

type (
	mcpCallParams = mcp.CallToolParams
	mcpText       = mcp.TextContent
)
