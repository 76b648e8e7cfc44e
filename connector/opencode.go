package connector

import (
	"encoding/json"
	"fmt"
	"strings"
)

// opencode launches OpenCode with its configuration in OPENCODE_CONFIG_CONTENT: an mcp
// entry for cotal (a local server: command array and environment) and the persona prompt
// file as an instructions file.
func opencode() Connector {
	return Connector{Name: "opencode", Program: "opencode", Install: "npm i -g opencode-ai", Build: buildOpenCode}
}

// openCodeMCP is a local server of OpenCode's mcp configuration.
type openCodeMCP struct {
	Type        string            `json:"type"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Enabled     bool              `json:"enabled"`
}

func buildOpenCode(l Launch) (Spec, error) {
	if err := l.check(); err != nil {
		return Spec{}, err
	}
	if l.Model != "" && !strings.Contains(l.Model, "/") {
		return Spec{}, fmt.Errorf("--model %s: opencode names a model as provider/model, e.g. anthropic/claude-sonnet-4-5", l.Model)
	}
	doc := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"mcp": map[string]openCodeMCP{ServerName: {
			Type: "local", Command: []string{l.Exe, "mcp"}, Environment: l.MCPEnv("opencode"), Enabled: true,
		}},
	}
	s := Spec{Command: "opencode", Env: map[string]string{}}
	if pf := l.promptFile(); pf != nil {
		s.Files = append(s.Files, *pf)
		doc["instructions"] = []string{pf.Path}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return Spec{}, fmt.Errorf("encode opencode config: %w", err)
	}
	s.Env["OPENCODE_CONFIG_CONTENT"] = string(b)
	// Values are joined to their flags: `--prompt=<text>` is the prompt whatever it starts
	// with, where `--prompt <text>` would read a leading "-" as the next option.
	if l.HasPrompt {
		s.Args = append(s.Args, "--prompt="+l.Prompt)
	}
	if l.Model != "" {
		s.Args = append(s.Args, "--model="+l.Model)
	}
	s.Args = append(s.Args, l.Args...)
	return s, nil
}
