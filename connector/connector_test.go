package connector

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// launch is a typical launch on an authenticated mesh.
func launch() Launch {
	return Launch{
		Space: "main", Name: "dave", Role: "builder", Servers: "nats://127.0.0.1:4222",
		CredsPath: "/p/.cotal/run/dave/creds", Subscribe: []string{"general", "team.backend"},
		AllowSubscribe: []string{"general", "team.>"}, AllowPublish: []string{"team.backend"},
		LifecycleUID: "0123456789abcdefghijklmnop", AgentFile: "/p/.cotal/agents/dave.md",
		SystemPrompt: "You build the backend.\n", Exe: "/usr/local/bin/cotal",
		RunDir: "/p/.cotal/run/dave", DataDir: "/p/.cotal",
		Getenv: func(k string) string { return map[string]string{"HOME": "/home/op"}[k] },
	}
}

var wantEnv = map[string]string{
	"COTAL_SPACE": "main", "COTAL_NAME": "dave", "COTAL_ROLE": "builder",
	"COTAL_SERVERS": "nats://127.0.0.1:4222", "COTAL_CREDS": "/p/.cotal/run/dave/creds",
	"COTAL_SUBSCRIBE": "general,team.backend", "COTAL_ALLOW_SUBSCRIBE": "general,team.>",
	"COTAL_ALLOW_PUBLISH": "team.backend", "COTAL_KIND": "agent",
	"COTAL_LIFECYCLE_UID": "0123456789abcdefghijklmnop", "COTAL_AGENT_FILE": "/p/.cotal/agents/dave.md",
}

func withHarness(h string) map[string]string {
	m := map[string]string{"COTAL_HARNESS": h}
	if h == "claude" {
		m["COTAL_CHANNEL"] = "1"
	}
	for k, v := range wantEnv {
		m[k] = v
	}
	return m
}

func file(t *testing.T, s Spec, path string) File {
	t.Helper()
	for _, f := range s.Files {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("spec writes no %s; files %+v", path, s.Files)
	return File{}
}

func checkMCPJSON(t *testing.T, b []byte, harness string) {
	t.Helper()
	var doc struct {
		MCPServers map[string]mcpServer `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("mcp config %s: %v", b, err)
	}
	got := doc.MCPServers["cotal"]
	want := mcpServer{Command: "/usr/local/bin/cotal", Args: []string{"mcp"}, Env: withHarness(harness)}
	if len(doc.MCPServers) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("mcp config servers %+v, want only cotal = %+v", doc.MCPServers, want)
	}
}

func TestClaude(t *testing.T) {
	l := launch()
	l.Model, l.Prompt, l.HasPrompt, l.Args = "opus", "say hi", true, []string{"--verbose"}
	s, err := buildClaude(l)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--mcp-config=/p/.cotal/run/dave/mcp.json", "--allowedTools=mcp__cotal", "--strict-mcp-config",
		"--dangerously-load-development-channels", "server:cotal",
		"--append-system-prompt-file=/p/.cotal/run/dave/system-prompt.md", "--model=opus", "--verbose", "--", "say hi"}
	if s.Command != "claude" || !reflect.DeepEqual(s.Args, want) {
		t.Fatalf("claude %q %q, want %q", s.Command, s.Args, want)
	}
	checkMCPJSON(t, file(t, s, "/p/.cotal/run/dave/mcp.json").Data, "claude")
	if got := string(file(t, s, "/p/.cotal/run/dave/system-prompt.md").Data); got != l.SystemPrompt {
		t.Fatalf("system prompt file %q", got)
	}
	if len(s.Env) != 0 || len(s.Remove) != 0 {
		t.Fatalf("claude env %v remove %v: want none (all in the run folder)", s.Env, s.Remove)
	}
}

func TestClaudeMinimal(t *testing.T) {
	l := launch()
	l.SystemPrompt, l.CredsPath, l.Role = "  \n", "", ""
	s, err := buildClaude(l)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--mcp-config=/p/.cotal/run/dave/mcp.json", "--allowedTools=mcp__cotal", "--strict-mcp-config",
		"--dangerously-load-development-channels", "server:cotal"}
	if !reflect.DeepEqual(s.Args, want) || len(s.Files) != 1 {
		t.Fatalf("claude args %q files %d, want %q and the mcp config only", s.Args, len(s.Files), want)
	}
	if b := file(t, s, "/p/.cotal/run/dave/mcp.json").Data; strings.Contains(string(b), "COTAL_CREDS") || strings.Contains(string(b), "COTAL_ROLE") {
		t.Fatalf("open mesh config names creds or an empty role: %s", b)
	}
}

func TestCodex(t *testing.T) {
	l := launch()
	l.Model, l.Prompt, l.HasPrompt = "gpt-5", "start", true
	l.SystemPrompt = "Line \"one\"\nback\\slash\x01"
	s, err := buildCodex(l)
	if err != nil {
		t.Fatal(err)
	}
	home := "/p/.cotal/codex/dave"
	if s.Command != "codex" || !reflect.DeepEqual(s.Args, []string{"--", "start"}) || s.Env["CODEX_HOME"] != home || !reflect.DeepEqual(s.Dirs, []string{home}) {
		t.Fatalf("codex spec %+v", s)
	}
	want := `# Written by cotal spawn for agent dave; removed when it exits.
model = "gpt-5"
developer_instructions = "Line \"one\"\nback\\slash\u0001"

[mcp_servers.cotal]
command = "/usr/local/bin/cotal"
args = ["mcp"]
startup_timeout_sec = 30
default_tools_approval_mode = "approve"

[mcp_servers.cotal.env]
COTAL_AGENT_FILE = "/p/.cotal/agents/dave.md"
COTAL_ALLOW_PUBLISH = "team.backend"
COTAL_ALLOW_SUBSCRIBE = "general,team.>"
COTAL_CREDS = "/p/.cotal/run/dave/creds"
COTAL_HARNESS = "codex"
COTAL_KIND = "agent"
COTAL_LIFECYCLE_UID = "0123456789abcdefghijklmnop"
COTAL_NAME = "dave"
COTAL_ROLE = "builder"
COTAL_SERVERS = "nats://127.0.0.1:4222"
COTAL_SPACE = "main"
COTAL_SUBSCRIBE = "general,team.backend"
`
	if got := string(file(t, s, filepath.Join(home, "config.toml")).Data); got != want {
		t.Fatalf("config.toml:\n%s\nwant:\n%s", got, want)
	}
	if f := file(t, s, filepath.Join(home, "auth.json")); f.Link != "/home/op/.codex/auth.json" {
		t.Fatalf("auth link %+v", f)
	}
	if !reflect.DeepEqual(s.Remove, []string{home + "/config.toml", home + "/auth.json"}) {
		t.Fatalf("codex removes %q", s.Remove)
	}
	l.Getenv = func(k string) string { return map[string]string{"CODEX_HOME": "/op/codex"}[k] }
	if s, _ := buildCodex(l); file(t, s, filepath.Join(home, "auth.json")).Link != "/op/codex/auth.json" {
		t.Fatal("the operator's CODEX_HOME is not where auth.json is linked from")
	}
}

func TestOpenCode(t *testing.T) {
	l := launch()
	l.Model, l.Prompt, l.HasPrompt = "anthropic/claude-sonnet-4-5", "go", true
	s, err := buildOpenCode(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--prompt=go", "--model=anthropic/claude-sonnet-4-5"}; s.Command != "opencode" || !reflect.DeepEqual(s.Args, want) {
		t.Fatalf("opencode %q %q", s.Command, s.Args)
	}
	var doc struct {
		MCP          map[string]openCodeMCP `json:"mcp"`
		Instructions []string               `json:"instructions"`
	}
	if err := json.Unmarshal([]byte(s.Env["OPENCODE_CONFIG_CONTENT"]), &doc); err != nil {
		t.Fatal(err)
	}
	want := openCodeMCP{Type: "local", Command: []string{"/usr/local/bin/cotal", "mcp"}, Environment: withHarness("opencode"), Enabled: true}
	if !reflect.DeepEqual(doc.MCP["cotal"], want) || len(doc.MCP) != 1 {
		t.Fatalf("opencode mcp %+v, want %+v", doc.MCP, want)
	}
	if !reflect.DeepEqual(doc.Instructions, []string{"/p/.cotal/run/dave/system-prompt.md"}) {
		t.Fatalf("instructions %q", doc.Instructions)
	}
	file(t, s, "/p/.cotal/run/dave/system-prompt.md")
}

func TestCommand(t *testing.T) {
	l := launch()
	l.Args, l.Model = []string{"./bot", "-v"}, "m1"
	s, err := buildCommand(l)
	if err != nil {
		t.Fatal(err)
	}
	if s.Command != "./bot" || !reflect.DeepEqual(s.Args, []string{"-v"}) {
		t.Fatalf("command %q %q", s.Command, s.Args)
	}
	checkMCPJSON(t, file(t, s, "/p/.cotal/run/dave/mcp.json").Data, "command")
	for k, v := range withHarness("command") {
		if s.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, s.Env[k], v)
		}
	}
	if s.Env["COTAL_MCP_CONFIG"] != "/p/.cotal/run/dave/mcp.json" || s.Env["COTAL_MODEL"] != "m1" ||
		s.Env["COTAL_SYSTEM_PROMPT_FILE"] != "/p/.cotal/run/dave/system-prompt.md" {
		t.Fatalf("command env %v", s.Env)
	}
	if _, ok := s.Env["COTAL_PROMPT"]; ok {
		t.Fatal("COTAL_PROMPT set without --prompt")
	}
}

func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Launch)
		want string
	}{
		{"claude", func(l *Launch) { l.Model = "xai/grok" }, "provider/model name belongs to another harness"},
		{"opencode", func(l *Launch) { l.Model = "opus" }, "provider/model"},
		{"command", func(l *Launch) {}, "needs the program to run after --"},
		{"claude", func(l *Launch) { l.HasPrompt, l.Prompt = true, " " }, "--prompt is empty"},
		{"codex", func(l *Launch) { l.RunDir = "rel" }, "absolute path"},
		{"codex", func(l *Launch) { l.DataDir = "" }, "CODEX_HOME"},
		{"claude", func(l *Launch) { l.Model = "--settings={}" }, "never an option"},
		{"codex", func(l *Launch) { l.Model = "-c" }, "never an option"},
		{"opencode", func(l *Launch) { l.Model = "-x/y" }, "never an option"},
		{"command", func(l *Launch) { l.Args, l.Model = []string{"prog"}, "-v" }, "never an option"},
		{"claude", func(l *Launch) { l.Model = "opus --verbose" }, "space or a control character"},
		{"codex", func(l *Launch) { l.Model = "gpt\n5" }, "space or a control character"},
		{"claude", func(l *Launch) { l.Model = strings.Repeat("m", MaxModelLength+1) }, "at most"},
		{"codex", func(l *Launch) { l.Name = ".." }, "agent name"},
		{"claude", func(l *Launch) { l.Name = "a/b" }, "agent name"},
	} {
		l := launch()
		c.edit(&l)
		con, _ := Lookup(c.name)
		if _, err := con.Build(l); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	l := launch()
	l.Model = "arn:aws:bedrock:us-east-1:1:inference-profile/x"
	if _, err := buildClaude(l); err != nil {
		t.Errorf("a Bedrock ARN is refused: %v", err)
	}
}

// secret matches an nkey seed or a JWT.
var secret = regexp.MustCompile(`S[UOA][A-Z2-7]{50,}|eyJ[A-Za-z0-9_-]{8,}`)

// TestNoSecretInSpec: whatever a connector puts in argv, env or a file it writes names
// the creds file, never a credential.
func TestNoSecretInSpec(t *testing.T) {
	for _, con := range All() {
		l := launch()
		l.Args = []string{"prog"}
		s, err := con.Build(l)
		if err != nil {
			t.Fatalf("%s: %v", con.Name, err)
		}
		all := strings.Join(append([]string{s.Command}, s.Args...), " ")
		for k, v := range s.Env {
			all += " " + k + "=" + v
		}
		for _, f := range s.Files {
			all += " " + string(f.Data)
		}
		if !strings.Contains(all, l.CredsPath) && con.Name != "command" {
			t.Errorf("%s: the creds path is nowhere in the spec", con.Name)
		}
		if secret.MatchString(all) {
			t.Errorf("%s: spec contains a seed or a JWT: %s", con.Name, all)
		}
	}
}

func TestLookup(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"claude", "codex", "command", "opencode"}) {
		t.Fatalf("names %q", got)
	}
	if _, ok := Lookup("vim"); ok {
		t.Fatal("vim is a connector")
	}
}
