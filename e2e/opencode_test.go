package e2e

import (
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/internal/fakemodel"
)

// openCodeHome prepares OpenCode's user configuration ($XDG_CONFIG_HOME/opencode): a
// provider "fake" speaking Chat Completions to the stand-in at url, its model the default,
// and no update check or model catalogue fetched from the network.
func openCodeHome(t *testing.T, p *project, url string) {
	t.Helper()
	writeJSON(t, filepath.Join(p.home, ".config", "opencode", "opencode.json"), map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		"model":      "fake/model-1",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": url + "/v1", "apiKey": "sk-e2e-0000"},
			"models":  map[string]any{"model-1": map[string]any{"name": "Model 1", "tool_call": true}},
		}},
	})
	p.setenv("OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1")
}

// TestOpenCodePromptIsText: a prompt that is itself a --prompt option reaches the model as
// the user's first turn, whole.
func TestOpenCodePromptIsText(t *testing.T) {
	bin := harness(t, "opencode")
	fm := fakemodel.Start(t, func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: "ok"} })
	p := newProject(t, filepath.Dir(bin))
	openCodeHome(t, p, fm.URL)
	p.up()
	p.cotal("personas", "new", "dave", "--prompt", "You build the backend.", "--allow-publish", "general")
	checkPromptIsText(t, p, fm, "opencode")
}

// TestOpenCodeDMRoundTrip: OpenCode has no pushed turns, so bob's DM waits in dave's inbox
// (not acked) until the model reads it with cotal_inbox after a typed nudge; the model
// answers with cotal_dm and bob gets it.
func TestOpenCodeDMRoundTrip(t *testing.T) {
	bin := harness(t, "opencode")
	dm := newDMModel("ping-5f20", "pong-5f20", "nudge-5f20 read your cotal inbox", "bob")
	fm := fakemodel.Start(t, dm.script)
	p := newProject(t, filepath.Dir(bin))
	openCodeHome(t, p, fm.URL)
	p.up()
	checkDMRoundTrip(t, p, fm, dm, dmCase{agent: "opencode", gated: noPush, submit: typeLine})
}
