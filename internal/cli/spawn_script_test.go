package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/trust"
)

// mcpAgent is the agent program the spawn scripts run with `cotal spawn --agent command
// -- mcpagent TEXT WANT`: it reads COTAL_MCP_CONFIG, starts the cotal MCP server that
// file names (with its command, arguments and environment) through the SDK's client,
// prints the mode of its creds file and its roster line, posts TEXT with cotal_send, then
// calls cotal_inbox until an item carries WANT, prints it and exits 0. It exits 1 on any
// failure and after 30 s (a hang guard) without WANT.
func mcpAgent() int {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mcpagent TEXT WANT")
		return 2
	}
	if err := runMCPAgent(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		return 1
	}
	return 0
}

func runMCPAgent(text, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	srv, ok := doc.MCPServers["cotal"]
	if !ok {
		return fmt.Errorf("mcp config names no cotal server: %s", b)
	}
	st, err := os.Stat(srv.Env["COTAL_CREDS"])
	if err != nil {
		return fmt.Errorf("creds: %w", err)
	}
	fmt.Printf("creds mode %o\n", st.Mode().Perm())
	if b, err := os.ReadFile(srv.Env["COTAL_CREDS"]); err == nil {
		if c, err := trust.ReadCreds(b); err == nil && c.LifecycleUID != "" && c.LifecycleUID == srv.Env["COTAL_LIFECYCLE_UID"] {
			fmt.Println("COTAL_LIFECYCLE_UID is the creds' uid")
		}
	}

	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpagent", Version: "test"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start the mcp server: %w", err)
	}
	defer session.Close()
	return exerciseAgent(ctx, session, srv.Env["COTAL_NAME"], text, want)
}

// callTool calls one MCP tool and returns its text, or the tool's error as an error.
func callTool(ctx context.Context, session *mcp.ClientSession, tool string, args map[string]any) (string, error) {
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: tool error: %s", tool, strings.Join(out, "\n"))
	}
	return strings.Join(out, "\n"), nil
}

// exerciseAgent prints name's roster line, posts text to its channel and waits until its
// inbox shows want, through session's MCP tools.
func exerciseAgent(ctx context.Context, session *mcp.ClientSession, name, text, want string) error {
	roster, err := callTool(ctx, session, "cotal_roster", nil)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(roster, "\n") {
		if strings.Contains(line, name) {
			fmt.Println("roster:", line)
		}
	}
	if _, err := callTool(ctx, session, "cotal_send", map[string]any{"text": text}); err != nil {
		return err
	}
	fmt.Println("sent")
	for {
		got, err := callTool(ctx, session, "cotal_inbox", nil)
		if err != nil {
			return err
		}
		if strings.Contains(got, want) {
			fmt.Println("inbox:", strings.ReplaceAll(got, "\n", " | "))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %q in the inbox: %w", want, ctx.Err())
		case <-time.After(100 * time.Millisecond): // re-check interval
		}
	}
}
