package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runSeat is a workflow run's seat launched in the claude harness (a claude on PATH that
// execs it): the agent's real MCP server (`cotal mcp`, as the harness's --mcp-config names
// it) and an MCP client standing in for the model. It reads its messages with cotal_wait
// and ends each turn a run hands it with cotal_yield, once per turn: a plain turn done with
// the note "did it", an ask's with the record {ok: true, n: 3}. It starts its MCP server
// (and so joins) only once the folder $RUNSEAT_OUT/join exists, and yields only once
// $RUNSEAT_OUT/go exists, so a spawn and a turn stay pending until the script says so. It
// reports in $RUNSEAT_OUT: starts (a line per process start), handed (the turn id of each
// turn message read), yields (the turn id of each yield that landed). A hangup is ignored:
// the seat outlives its manager's terminal, and its MCP server runs in a process group of
// its own for the same reason.
func runSeat() int {
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	out := os.Getenv("RUNSEAT_OUT")
	note := func(file, line string) {
		f, err := os.OpenFile(filepath.Join(out, file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, _ = fmt.Fprintln(f, line)
			_ = f.Close()
		}
	}
	var cfgPath string
	for _, a := range os.Args[1:] {
		if p, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			cfgPath = p
		}
	}
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runseat: --mcp-config:", err)
		return 1
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		fmt.Fprintln(os.Stderr, "runseat: mcp config:", err)
		return 1
	}
	srv := doc.MCPServers["cotal"]
	note("starts", srv.Env["COTAL_NAME"])
	waitFor(ctx, filepath.Join(out, "join"))
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its terminal hangs up with a killed manager: the seat's reports go to files.
	errs, err := os.OpenFile(filepath.Join(out, "errors"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 1
	}
	defer func() { _ = errs.Close() }()
	cmd.Stderr = errs
	ownGroup(cmd)
	session, err := mcp.NewClient(&mcp.Implementation{Name: "runseat", Version: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fmt.Fprintln(errs, "runseat: start the mcp server:", err)
		return 1
	}
	// Stopped, the seat ends its MCP server's process group at once, as a harness that
	// exits takes its server with it.
	defer func() { _ = killGroup(cmd.Process.Pid) }()
	_ = session // closed by its server's end
	fmt.Println("seat ready")
	turnRE := regexp.MustCompile(`it is your turn "([^"]+)"`)
	yielded := map[string]bool{}
	for ctx.Err() == nil {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "cotal_wait", Arguments: map[string]any{"timeout": 5}})
		if err != nil || res.IsError {
			fmt.Fprintln(errs, "runseat: cotal_wait:", err, res)
			if ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond) // the server is not answering: ask again
			}
			continue
		}
		text := strings.NewReplacer(`\"`, `"`, "&#34;", `"`).Replace(toolText(res)) // the quotes as the model reads them
		note("read", text)
		for _, m := range turnRE.FindAllStringSubmatch(text, -1) {
			turn := m[1]
			note("handed", turn)
			if yielded[turn] {
				continue
			}
			waitFor(ctx, filepath.Join(out, "go"))
			args := map[string]any{"turn": turn, "status": "done", "note": "did it"}
			if askFor(text, turn) {
				args = map[string]any{"turn": turn, "status": "done", "value": map[string]any{"ok": true, "n": 3}}
			}
			y, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "cotal_yield", Arguments: args})
			if err == nil && !y.IsError {
				yielded[turn] = true
				note("yields", turn)
			} else if y != nil {
				fmt.Fprintln(errs, "runseat: yield", turn+":", toolText(y))
			}
		}
	}
	return 0
}

// waitFor waits until path exists (the script lets the seat go on) or ctx ends.
func waitFor(ctx context.Context, path string) {
	for ctx.Err() == nil {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // the re-check interval of a poll
	}
}

// askFor reports whether the turn message naming turn asks for a record: the ask's
// sentence follows the turn's own line.
func askFor(text, turn string) bool {
	i := strings.Index(text, `it is your turn "`+turn+`"`)
	if i < 0 {
		return false
	}
	rest := text[i:]
	if j := strings.Index(rest[1:], "it is your turn"); j >= 0 {
		rest = rest[:j+1]
	}
	return strings.Contains(rest, "asks you for a record")
}
