package e2e

import (
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/internal/fakemodel"
)

// codexHome prepares what Codex reads from the operator: a sign-in with an API key
// ($HOME/.codex/auth.json, which cotal spawn links into the agent's CODEX_HOME), and the
// model API of the built-in openai provider moved to the stand-in at url.
func codexHome(t *testing.T, p *project, url string) {
	t.Helper()
	writeJSON(t, filepath.Join(p.home, ".codex", "auth.json"), map[string]any{
		"auth_mode": "apikey", "OPENAI_API_KEY": "sk-e2e-000000000000000000000000",
	})
	p.setenv("OPENAI_BASE_URL="+url+"/v1", "OPENAI_API_KEY=sk-e2e-000000000000000000000000", "CODEX_DISABLE_UPDATE_CHECK=1")
}

// codexArgs are the operator's extra arguments to codex (after -- in cotal spawn): the
// project folder trusted, so no trust prompt waits at start, and a model provider that
// is the stand-in at url (Responses API, the key from OPENAI_API_KEY).
func codexArgs(p *project, url string) []string {
	return []string{"--", "-c", `projects."` + p.dir + `".trust_level="trusted"`,
		"-c", `model_providers.fake={name="fake",base_url="` + url + `/v1",env_key="OPENAI_API_KEY",wire_api="responses"}`,
		"-c", `model_provider="fake"`, "-c", `model="fake-model"`}
}

// TestCodexPromptIsText: a prompt that is a codex --config option (a notify program that
// would write a marker) reaches the model as the user's first turn.
func TestCodexPromptIsText(t *testing.T) {
	bin := harness(t, "codex")
	fm := fakemodel.Start(t, func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: "ok"} })
	p := newProject(t, filepath.Dir(bin))
	codexHome(t, p, fm.URL)
	p.up()
	p.cotal("personas", "new", "dave", "--prompt", "You build the backend.", "--allow-publish", "general")
	checkPromptIsText(t, p, fm, "codex", codexArgs(p, fm.URL)...)
}

// TestCodexDMRoundTrip: Codex has no pushed turns, so bob's DM waits in dave's inbox (not
// acked) until the model reads it with cotal_inbox after a typed nudge; the model answers
// with cotal_dm and bob gets it.
func TestCodexDMRoundTrip(t *testing.T) {
	bin := harness(t, "codex")
	dm := newDMModel("ping-3b9d", "pong-3b9d", "nudge-3b9d read your cotal inbox", "bob")
	fm := fakemodel.Start(t, dm.script)
	p := newProject(t, filepath.Dir(bin))
	codexHome(t, p, fm.URL)
	p.up()
	checkDMRoundTrip(t, p, fm, dm, dmCase{agent: "codex", gated: noPush, submit: typeLine}, codexArgs(p, fm.URL)...)
}

// noPush is the gate of a harness that takes no pushed turns at all.
func noPush(string) bool { return true }
