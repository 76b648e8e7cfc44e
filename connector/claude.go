package connector

import (
	"fmt"
	"strings"
	"unicode"
)

// claude launches Claude Code with only the cotal MCP server (--strict-mcp-config), the
// server's channel turned on so a message wakes an idle session, and the persona appended
// to the system prompt from a private file (never argv). Options come first, each value
// joined to its flag (--model=<m>); the operator's extra arguments follow; the prompt is
// last, after "--".
func claude() Connector {
	return Connector{Name: "claude", Program: "claude", Install: "npm i -g @anthropic-ai/claude-code", Build: buildClaude}
}

func buildClaude(l Launch) (Spec, error) {
	if err := l.check(); err != nil {
		return Spec{}, err
	}
	// A provider/model name belongs to another harness: claude would start on a different
	// model than the one named. A Bedrock ARN carries a slash and is served.
	if strings.Contains(l.Model, "/") && !strings.HasPrefix(l.Model, "arn:") {
		return Spec{}, fmt.Errorf("--model %s: a provider/model name belongs to another harness (use --agent opencode); claude takes a Claude model such as opus or sonnet", l.Model)
	}
	cfg, err := l.mcpConfigFile("claude")
	if err != nil {
		return Spec{}, err
	}
	s := Spec{Command: "claude", Env: map[string]string{}, Files: []File{cfg}}
	// The agent's own mesh tools are allowed up front (as codex's config approves them):
	// a seat has no one at its terminal to answer a permission prompt for each cotal_*.
	s.Args = append(s.Args, "--mcp-config="+cfg.Path, "--allowedTools=mcp__"+ServerName, "--strict-mcp-config",
		"--dangerously-load-development-channels", "server:"+ServerName)
	if pf := l.promptFile(); pf != nil {
		s.Files = append(s.Files, *pf)
		s.Args = append(s.Args, "--append-system-prompt-file="+pf.Path)
	}
	if l.Model != "" {
		s.Args = append(s.Args, "--model="+l.Model)
	}
	s.Args = append(s.Args, l.Args...)
	if l.HasPrompt {
		// The first turn is the positional after "--": never an option, whatever it starts
		// with. After "--" claude still runs a subcommand named by the whole first operand
		// (`claude -- update`), and no subcommand name holds a space: a one-word prompt
		// gets a trailing space.
		s.Args = append(s.Args, "--", claudePrompt(l.Prompt))
	}
	return s, nil
}

// claudePrompt is the prompt as claude's first operand: a prompt with no white space gets
// a trailing space, so it can never name one of claude's subcommands.
func claudePrompt(p string) string {
	if strings.IndexFunc(p, unicode.IsSpace) < 0 {
		return p + " "
	}
	return p
}
