package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// claudeKey is the API key the stand-in model is called with (apiKeyHelper prints it).
const claudeKey = "sk-ant-e2e-0000000000000000000000"

// claudeHome prepares Claude Code's user configuration in the project's home: onboarding
// done, the project folder trusted, the API key from an apiKeyHelper approved, and every
// call home turned off; the model API is the stand-in at url.
func claudeHome(t *testing.T, p *project, url string) {
	t.Helper()
	key := claudeKey[len(claudeKey)-20:]
	state := map[string]any{
		"hasCompletedOnboarding": true,
		"lastOnboardingVersion":  "2.1.328",
		"theme":                  "dark",
		"numStartups":            5,
		"customApiKeyResponses":  map[string]any{"approved": []string{key}, "rejected": []string{}},
		"projects": map[string]any{p.dir: map[string]any{
			"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true, "allowedTools": []string{},
		}},
	}
	writeJSON(t, filepath.Join(p.home, ".claude.json"), state)
	writeJSON(t, filepath.Join(p.home, ".claude", "settings.json"), map[string]any{
		"apiKeyHelper": "echo " + claudeKey,
	})
	p.setenv("ANTHROPIC_BASE_URL="+url,
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		// MCP tools in every request, rather than found through the ToolSearch tool.
		"ENABLE_TOOL_SEARCH=false")
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
