package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/fakemodel"
)

// hostilePrompt is a spawn prompt that a harness parsing it as an option would obey: an
// apiKeyHelper (a shell command Claude Code runs for its API key) that writes marker.
func hostilePrompt(marker string) string {
	return fmt.Sprintf(`--settings={"apiKeyHelper":"touch %s; echo %s"}`, marker, claudeKey)
}

// checkPromptIsText spawns persona dave with harness agent and the hostile prompt, and
// checks the stand-in model gets the prompt as the user's text and the marker never
// appears.
func checkPromptIsText(t *testing.T, p *project, fm *fakemodel.Server, agent string, extra ...string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	prompt := hostilePrompt(marker)
	args := append([]string{"spawn", "dave", "--agent", agent, "--prompt", prompt}, extra...)
	s := p.start("cotal spawn --agent "+agent, args...)
	ran := func() bool { _, err := os.Stat(marker); return err == nil }
	until(t, "the model gets the prompt as the user's text", 90*time.Second, func() bool {
		return fm.Saw(prompt) || s.exited() || ran()
	})
	if ran() {
		t.Fatalf("the prompt ran as an option: %s exists", marker)
	}
	if !fm.Saw(prompt) {
		t.Fatalf("%s exited before the model got the prompt", agent)
	}
	s.stop()
	if ran() {
		t.Fatalf("the prompt ran as an option: %s exists", marker)
	}
}

// dmScript answers a user turn holding ping with a cotal_dm of pong to peer, the tool's
// result with a short text, and anything else with "ok".
func dmScript(ping, pong, peer string) fakemodel.Script {
	return func(r fakemodel.Request) fakemodel.Reply {
		if r.LastIsToolResult {
			return fakemodel.Reply{Text: "sent"}
		}
		if strings.Contains(r.LastUser(), ping) {
			if tool, ok := r.Tool("cotal_dm"); ok {
				return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: tool, Args: map[string]string{"to": peer, "text": pong}}}
			}
		}
		return fakemodel.Reply{Text: "ok"}
	}
}

// online reports whether name is online in the space's roster.
func online(t *testing.T, p *project, name string) bool {
	t.Helper()
	var st struct {
		Roster []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"roster"`
	}
	if err := json.Unmarshal([]byte(p.cotal("status", "--json")), &st); err != nil {
		t.Fatalf("cotal status --json: %v", err)
	}
	for _, r := range st.Roster {
		if r.Name == name && r.State != "offline" {
			return true
		}
	}
	return false
}

// held reports whether agent's DM inbox still holds (unread or unacked) a message with text.
func held(t *testing.T, p *project, agent, text string) bool {
	t.Helper()
	out := p.cotal("deliver", "pending", agent, "--json")
	var docs []struct {
		Durables []struct {
			Kind     string `json:"kind"`
			Messages []struct {
				Text string `json:"text"`
			} `json:"messages"`
		} `json:"durables"`
	}
	if err := json.Unmarshal([]byte(out), &docs); err != nil {
		var one struct {
			Durables []struct {
				Kind     string `json:"kind"`
				Messages []struct {
					Text string `json:"text"`
				} `json:"messages"`
			} `json:"durables"`
		}
		if err := json.Unmarshal([]byte(out), &one); err != nil {
			t.Fatalf("deliver pending --json: %v\n%s", err, out)
		}
		docs = append(docs[:0], one)
	}
	for _, d := range docs {
		for _, h := range d.Durables {
			for _, m := range h.Messages {
				if strings.Contains(m.Text, text) {
					return true
				}
			}
		}
	}
	return false
}

// checkDMRoundTrip: agent dave (spawned with harness agent) gets bob's DM as a turn the
// stand-in model sees, answers with cotal_dm, and bob gets the answer; the DM is acked only
// once the model has it.
func checkDMRoundTrip(t *testing.T, p *project, fm *fakemodel.Server, agent, ping, pong string, extra ...string) {
	t.Helper()
	p.cotal("personas", "new", "dave", "--prompt", "You answer direct messages.", "--allow-publish", "general")
	args := append([]string{"spawn", "dave", "--agent", agent, "--prompt", "Wait for direct messages."}, extra...)
	agentSession := p.start("cotal spawn --agent "+agent, args...)
	until(t, "dave is online (its cotal mcp joined)", 90*time.Second, func() bool {
		return online(t, p, "dave") || agentSession.exited()
	})
	if agentSession.exited() {
		t.Fatalf("%s exited before dave came online", agent)
	}
	bob := p.start("cotal join --name bob", "join", "--name", "bob")
	until(t, "bob joined", 30*time.Second, func() bool { return strings.Contains(bob.text(), "general") || bob.exited() })
	bob.send("/dm dave " + ping + "\r")

	deadline := time.Now().Add(90 * time.Second)
	for !fm.Saw(ping) && time.Now().Before(deadline) && !agentSession.exited() {
		time.Sleep(200 * time.Millisecond)
	}
	if !fm.Saw(ping) {
		if held(t, p, "dave", ping) {
			t.Fatalf("the DM never reached %s's model as a turn (no push); it is still in dave's inbox, not acked", agent)
		}
		t.Fatalf("the DM never reached %s's model as a turn, and it is gone from dave's inbox: acked without the agent having it", agent)
	}
	until(t, "bob gets the answer", 60*time.Second, func() bool {
		return strings.Contains(bob.text(), pong) || bob.exited()
	})
	if !strings.Contains(bob.text(), pong) {
		t.Fatal("bob's session ended before the answer came")
	}
	until(t, "the DM the agent got is acked", 30*time.Second, func() bool { return !held(t, p, "dave", ping) })
}

// TestClaudePromptIsText: a prompt that is a --settings option with an apiKeyHelper, and
// one that is the name of a claude subcommand (doctor), each reach the model as the
// user's first turn.
func TestClaudePromptIsText(t *testing.T) {
	bin := harness(t, "claude")
	fm := fakemodel.Start(t, func(fakemodel.Request) fakemodel.Reply { return fakemodel.Reply{Text: "ok"} })
	p := newProject(t, filepath.Dir(bin))
	claudeHome(t, p, fm.URL)
	p.up()
	p.cotal("personas", "new", "dave", "--prompt", "You build the backend.", "--allow-publish", "general")
	checkPromptIsText(t, p, fm, "claude")

	s := p.start("cotal spawn --prompt doctor", "spawn", "dave", "--agent", "claude", "--prompt", "doctor")
	asked := func() bool {
		for _, r := range fm.Requests() {
			if strings.HasSuffix(strings.TrimSpace(r.LastUser()), "\ndoctor") {
				return true
			}
		}
		return false
	}
	until(t, "the model gets the one-word prompt doctor", 90*time.Second, func() bool { return asked() || s.exited() })
	if !asked() {
		t.Fatal("claude exited before the model got the prompt doctor: it ran as a subcommand")
	}
}

func TestClaudeDMRoundTrip(t *testing.T) {
	bin := harness(t, "claude")
	fm := fakemodel.Start(t, dmScript("ping-7c1e", "pong-7c1e", "bob"))
	p := newProject(t, filepath.Dir(bin))
	claudeHome(t, p, fm.URL)
	p.up()
	checkDMRoundTrip(t, p, fm, "claude", "ping-7c1e", "pong-7c1e")
}
