package connector

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// mcpServer is one server of a Claude Code --mcp-config file.
type mcpServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// MCPConfig returns the Claude Code --mcp-config document that starts `<Exe> mcp` as this
// agent: {"mcpServers":{"cotal":{"command":...,"args":["mcp"],"env":{...}}}}.
func (l Launch) MCPConfig(harness string) ([]byte, error) {
	doc := map[string]map[string]mcpServer{"mcpServers": {
		ServerName: {Command: l.Exe, Args: []string{"mcp"}, Env: l.MCPEnv(harness)},
	}}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode mcp config: %w", err)
	}
	return append(b, '\n'), nil
}

// mcpConfigFile is the --mcp-config file in the run folder.
func (l Launch) mcpConfigFile(harness string) (File, error) {
	b, err := l.MCPConfig(harness)
	if err != nil {
		return File{}, err
	}
	return File{Path: filepath.Join(l.RunDir, "mcp.json"), Data: b}, nil
}
