package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// mcpProc is one real `cotal mcp` process and the MCP client session on its stdio.
type mcpProc struct {
	cmd     *exec.Cmd
	session *mcp.ClientSession
	stderr  *lockedBuffer
}

// startMCP starts `cotal mcp ARGS...` in the script's folder and connects an MCP client
// to it; on failure it returns the error and what the process wrote to stderr.
func startMCP(ctx context.Context, ts *testscript.TestScript, args ...string) (*mcpProc, error) {
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	cmd := exec.Command(exe, append([]string{"mcp"}, args...)...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = os.Environ()
	for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	p := &mcpProc{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	p.session, err = mcp.NewClient(&mcp.Implementation{Name: "mcpsessions", Version: "test"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return p, fmt.Errorf("%w; stderr: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	return p, nil
}

// call calls tool and returns its text on one line.
func (p *mcpProc) call(ctx context.Context, tool string, args map[string]any) string {
	res, err := p.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "error: " + err.Error()
	}
	return toolText(res)
}

// cmdMCPSessions runs two real `cotal mcp --name NAME` processes, one after the other
// while the first lives, and prints what each got, for the script to check:
//
//	first: joined                   the first session serves NAME
//	second: refused: <why>          the second is refused while the first lives
//	second: joined                  (the second joined beside it: DMs would be split)
//	roster: <line>                  NAME's roster line, read right after the refusal
//	first got N of N DMs            N DMs sent by `cotal send dm` all reach the first
//	after a kill: joined|refused    a session started after the first was SIGKILLed
//	after a close: joined|refused   a session started after the previous one closed
//
//	mcpsessions NAME
func cmdMCPSessions(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mcpsessions NAME")
	}
	name := args[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	out := ts.Stdout()
	first, err := startMCP(ctx, ts, "--name", name)
	if err != nil {
		ts.Fatalf("first session: %v", err)
	}
	defer func() { _ = first.session.Close() }()
	first.call(ctx, "cotal_roster", nil)
	fmt.Fprintln(out, "first: joined")

	second, err := startMCP(ctx, ts, "--name", name)
	if err != nil {
		why := strings.TrimSpace(second.stderr.String())
		fmt.Fprintln(out, "second: refused:", why[strings.LastIndex(why, "\n")+1:])
	} else {
		fmt.Fprintln(out, "second: joined")
		defer func() { _ = second.session.Close() }()
	}
	roster := first.call(ctx, "cotal_roster", nil)
	fmt.Fprintln(out, "roster:", roster)

	const dms = 4
	for i := range dms {
		send := exec.Command(first.cmd.Path, "send", "dm", name, fmt.Sprintf("dm %d", i))
		send.Dir, send.Env = first.cmd.Dir, first.cmd.Env
		if b, err := send.CombinedOutput(); err != nil {
			ts.Fatalf("cotal send dm: %v: %s", err, b)
		}
	}
	got := map[string]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < dms && time.Now().Before(deadline); {
		window := first.call(ctx, "cotal_inbox", nil)
		for i := range dms {
			if strings.Contains(window, fmt.Sprintf(">dm %d<", i)) {
				got[fmt.Sprint(i)] = true
			}
		}
		if len(got) < dms {
			time.Sleep(50 * time.Millisecond) // the re-check interval of a poll, not a wait for time to pass
		}
	}
	fmt.Fprintf(out, "first got %d of %d DMs\n", len(got), dms)

	if err := first.cmd.Process.Kill(); err != nil {
		ts.Fatalf("kill the first session: %v", err)
	}
	_ = first.session.Close()
	fmt.Fprintln(out, "after a kill:", joinedOrRefused(ctx, ts, name))
	fmt.Fprintln(out, "after a close:", joinedOrRefused(ctx, ts, name))
}

// joinedOrRefused starts a session of name and closes it, reporting whether it joined.
func joinedOrRefused(ctx context.Context, ts *testscript.TestScript, name string) string {
	p, err := startMCP(ctx, ts, "--name", name)
	if err != nil {
		return "refused: " + err.Error()
	}
	p.call(ctx, "cotal_roster", nil)
	if err := p.session.Close(); err != nil {
		ts.Logf("close: %v", err)
	}
	return "joined"
}
