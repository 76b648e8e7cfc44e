package connector

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// codex launches the Codex CLI with a private CODEX_HOME, <project>/.cotal/codex/<name>/,
// whose config.toml holds only the cotal MCP server ([mcp_servers.cotal]), the persona as
// developer_instructions and the model. The operator's auth.json is linked in, so a signed
// in Codex stays signed in; nothing else of the operator's Codex configuration is read.
func codex() Connector {
	return Connector{Name: "codex", Program: "codex", Install: "npm i -g @openai/codex", Build: buildCodex}
}

// CodexHome is the private CODEX_HOME of agent name under the project's .cotal/ folder.
func CodexHome(dataDir, name string) string { return filepath.Join(dataDir, "codex", name) }

func buildCodex(l Launch) (Spec, error) {
	if err := l.check(); err != nil {
		return Spec{}, err
	}
	if l.DataDir == "" {
		return Spec{}, fmt.Errorf("launch %s: codex needs the project's .cotal/ folder for its CODEX_HOME", l.Name)
	}
	home := CodexHome(l.DataDir, l.Name)
	cfg := filepath.Join(home, "config.toml")
	s := Spec{
		Command: "codex",
		Env:     map[string]string{"CODEX_HOME": home},
		Dirs:    []string{home},
		Files:   []File{{Path: cfg, Data: []byte(l.codexConfig())}},
		Remove:  []string{cfg},
	}
	if auth := l.operatorCodexAuth(); auth != "" && auth != filepath.Join(home, "auth.json") {
		link := filepath.Join(home, "auth.json")
		s.Files = append(s.Files, File{Path: link, Link: auth})
		s.Remove = append(s.Remove, link)
	}
	s.Args = append(s.Args, l.Args...)
	if l.HasPrompt {
		// codex [OPTIONS] -- [PROMPT]: after "--" the prompt is the first turn, never an
		// option or a subcommand.
		s.Args = append(s.Args, "--", l.Prompt)
	}
	return s, nil
}

// operatorCodexAuth is the operator's Codex sign-in file: $CODEX_HOME/auth.json, else
// ~/.codex/auth.json; "" when neither is known.
func (l Launch) operatorCodexAuth() string {
	if h := l.getenv("CODEX_HOME"); h != "" {
		return filepath.Join(h, "auth.json")
	}
	if h := l.getenv("HOME"); h != "" {
		return filepath.Join(h, ".codex", "auth.json")
	}
	return ""
}

// codexConfig is the config.toml of the agent's CODEX_HOME. Top-level keys come before
// the tables, as TOML requires.
func (l Launch) codexConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by cotal spawn for agent %s; removed when it exits.\n", tomlComment(l.Name))
	if l.Model != "" {
		fmt.Fprintf(&b, "model = %s\n", tomlString(l.Model))
	}
	if strings.TrimSpace(l.SystemPrompt) != "" {
		fmt.Fprintf(&b, "developer_instructions = %s\n", tomlString(l.SystemPrompt))
	}
	fmt.Fprintf(&b, "\n[mcp_servers.%s]\n", ServerName)
	fmt.Fprintf(&b, "command = %s\n", tomlString(l.Exe))
	b.WriteString("args = [\"mcp\"]\n")
	b.WriteString("startup_timeout_sec = 30\n")
	// The agent's own mesh tools: approved up front, as in every other harness.
	b.WriteString("default_tools_approval_mode = \"approve\"\n")
	fmt.Fprintf(&b, "\n[mcp_servers.%s.env]\n", ServerName)
	env := l.MCPEnv("codex")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, tomlString(env[k]))
	}
	return b.String()
}

// tomlString quotes s as a TOML basic string: backslash, quote and every control
// character escaped, so any text (a multi-line persona) stays one value.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlComment keeps s on one comment line.
func tomlComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
