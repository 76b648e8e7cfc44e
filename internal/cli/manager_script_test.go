package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// seatAgent is a seat's program in the manager's scripts:
//
//	seatagent          join the mesh through `cotal mcp` (COTAL_MCP_CONFIG), print
//	                   "seat ready", then echo each stdin line as "got: LINE" until EOF;
//	                   a line "call TOOL [JSON]" calls TOOL with the JSON object as its
//	                   arguments and prints "TOOL: RESULT" (or "TOOL error: ..."), and
//	                   "tools" prints "tools: NAME..."
//	seatagent fail N   print "oops" and exit N at once
//	seatagent quiet    never join; ignore SIGHUP (outlive a killed manager) and wait
func seatAgent() int {
	args := os.Args[1:]
	switch {
	case len(args) == 2 && args[0] == "fail":
		fmt.Println("oops")
		n, _ := strconv.Atoi(args[1])
		return n
	case len(args) == 1 && args[0] == "quiet":
		signal.Ignore(syscall.SIGHUP)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		return 0
	case len(args) == 0:
		if err := runSeatAgent(); err != nil {
			fmt.Fprintln(os.Stderr, "seatagent:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "usage: seatagent [fail N | quiet]")
	return 2
}

func runSeatAgent() error {
	ctx := context.Background()
	b, err := os.ReadFile(os.Getenv("COTAL_MCP_CONFIG"))
	if err != nil {
		return fmt.Errorf("COTAL_MCP_CONFIG: %w", err)
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("mcp config: %w", err)
	}
	srv := doc.MCPServers["cotal"]
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "seatagent", Version: "test"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start the mcp server: %w", err)
	}
	defer session.Close()
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "cotal_roster"}); err != nil {
		return err
	}
	fmt.Println("seat ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "call":
			var args map[string]any
			if raw := strings.TrimSpace(strings.TrimPrefix(line, "call "+f[1])); raw != "" {
				if err := json.Unmarshal([]byte(raw), &args); err != nil {
					fmt.Println(f[1], "bad arguments:", err)
					continue
				}
			}
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: f[1], Arguments: args})
			if err != nil {
				fmt.Println(f[1], "error:", strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			fmt.Println(f[1]+":", toolText(res))
		case line == "tools":
			res, err := session.ListTools(ctx, nil)
			if err != nil {
				fmt.Println("tools error:", err)
				continue
			}
			var names []string
			for _, t := range res.Tools {
				names = append(names, t.Name)
			}
			fmt.Println("tools:", strings.Join(names, " "))
		default:
			fmt.Println("got:", line)
		}
	}
	return nil
}

func toolText(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	s := strings.Join(out, " | ")
	if res.IsError {
		s = "error: " + s
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// cmdWaitGrep waits up to 20 s until FILE (under the work dir) matches REGEXP:
//
//	waitgrep FILE REGEXP
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitgrep FILE REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	// A hang guard, not a timing assertion: a cluster re-electing after a crash on a loaded
	// machine can take most of a minute before a daemon logs what it decided.
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s does not match %q after 90s; it holds:\n%s", args[0], args[1], b)
		}
		time.Sleep(50 * time.Millisecond) // re-check interval
	}
}
