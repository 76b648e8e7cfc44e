// Package connector turns "run this agent on the mesh with that harness" into a launch
// spec: the program, its arguments, the environment it gets, the files to write before it
// starts and the paths to remove after it exits. A connector is a pure function of its
// Launch: nothing here runs a program, writes a file or reads the environment, so each
// harness's wiring is checked by comparing specs.
//
// Every harness is wired the same way: its MCP configuration starts this binary's `cotal
// mcp` subcommand with the agent's identity in COTAL_* variables. The credential travels
// only as COTAL_CREDS, the path of a 0600 file the launcher wrote; no seed or JWT is ever
// put in an argument or a configuration file.
package connector

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Launch is what a connector needs to know to start one agent.
type Launch struct {
	Space     string   // the space the agent joins
	Name      string   // the agent's presence name and actor
	Role      string   // its role ("" for none)
	Servers   string   // NATS URLs, comma-separated
	CredsPath string   // the 0600 creds file; "" on an open mesh
	Subscribe []string // channels joined at boot
	// AllowSubscribe and AllowPublish are the agent's read and post ACLs, as its
	// credential was minted with them (the reference's connectors read them).
	AllowSubscribe []string
	AllowPublish   []string
	// Quiet and Muted are the persona's attention defaults (channels to receive without
	// waking on, and to drop).
	Quiet, Muted []string
	// LifecycleUID is the incarnation the credential was minted for ("" when the launcher
	// mints it later, or on an open mesh): the reference's connectors need it beside
	// their creds.
	LifecycleUID string
	// AgentFile is the path of the persona file the agent runs as ("" when none).
	AgentFile string
	// Capabilities are the persona's (spawn, ...): the MCP server lists the manager tools
	// only with spawn.
	Capabilities []string
	// Persona names the persona file the agent runs as ("" when unknown): with the spawn
	// capability, its grant bounds the personas the agent defines.
	Persona string

	Model string // model override ("" leaves the harness's default)
	// Prompt is the first turn to submit ("" for none). It is text from whoever asked for
	// the spawn, so every connector passes it where the harness reads a value and never an
	// option or a subcommand: after "--", as --prompt=<text>, or in an environment variable.
	Prompt       string
	HasPrompt    bool     // a prompt was given (an empty one is refused)
	SystemPrompt string   // the persona's prompt, appended to the system prompt
	Args         []string // extra arguments: for claude, codex and opencode appended to the harness's; for command the program and its arguments

	Exe     string // this binary: the MCP server is `<Exe> mcp`
	RunDir  string // a private 0700 folder for this run's files, removed after the run
	DataDir string // the project's .cotal/ folder, where harness homes live

	// Getenv reads the launcher's environment (the operator's CODEX_HOME, HOME); nil
	// reads nothing.
	Getenv func(string) string
}

// File is a file the launcher writes before the harness starts.
type File struct {
	Path string
	Data []byte
	// Link, when set, makes Path a symbolic link to Link instead (Data is ignored); it is
	// made only when Link exists.
	Link string
}

// Spec is how to start a harness. Files are written with mode 0600 (their folders 0700)
// before Command starts; Remove lists what to delete once it has exited.
type Spec struct {
	Command string
	Args    []string
	Env     map[string]string // set on top of the launcher's environment, minus its COTAL_* variables
	Files   []File
	Dirs    []string // private folders to create (0700) before the files
	Remove  []string // paths to delete after the run (besides RunDir and the creds file)
}

// Connector builds the launch spec of one harness.
type Connector struct {
	Name    string // the --agent value
	Program string // the executable it runs ("" for command: the first of Args)
	Install string // how to install Program
	Build   func(Launch) (Spec, error)
}

// Env variables of the MCP server's identity.
const (
	EnvSpace     = "COTAL_SPACE"
	EnvName      = "COTAL_NAME"
	EnvRole      = "COTAL_ROLE"
	EnvServers   = "COTAL_SERVERS"
	EnvCreds     = "COTAL_CREDS"
	EnvSubscribe = "COTAL_SUBSCRIBE"
	EnvHarness   = "COTAL_HARNESS"
	// EnvCapabilities is the persona's capabilities, comma-separated ("" for none).
	EnvCapabilities = "COTAL_CAPABILITIES"
	// EnvGrantPersona names the persona whose grant bounds the personas the agent defines
	// (set with the spawn capability; it is not the agent's identity, which COTAL_NAME
	// and COTAL_CREDS are).
	EnvGrantPersona = "COTAL_GRANT_PERSONA"
	// EnvChannel=1 makes `cotal mcp` push Claude Code channel notifications: Claude Code
	// takes them (with --dangerously-load-development-channels) but does not declare it.
	EnvChannel = "COTAL_CHANNEL"
	// EnvMCPConfig is the path of the Claude-style MCP configuration given to a command.
	EnvMCPConfig = "COTAL_MCP_CONFIG"
)

// The names the reference's connectors read (connector-core config.ts, configFromEnv)
// beside the ones above, which it shares; a launcher sets them so that either
// implementation's MCP server or connector comes up on the seat it is given.
const (
	EnvAllowSubscribe = "COTAL_ALLOW_SUBSCRIBE" // read ACL, comma-separated
	EnvAllowPublish   = "COTAL_ALLOW_PUBLISH"   // post ACL, comma-separated
	EnvLifecycleUID   = "COTAL_LIFECYCLE_UID"   // the credential's incarnation
	EnvAgentFile      = "COTAL_AGENT_FILE"      // the persona file's path
	EnvKind           = "COTAL_KIND"            // card kind: agent
	EnvModel          = "COTAL_MODEL"           // display-only model
	EnvVariant        = "COTAL_VARIANT"         // display-only model variant
	EnvQuiet          = "COTAL_QUIET"           // channels received without waking
	EnvMuted          = "COTAL_MUTED"           // channels dropped on receive
	// EnvLaunchMaterial names a 0600 JSON file holding servers, creds (a path), token and
	// userAuth: the reference's launchers put connection material there, not in the env.
	EnvLaunchMaterial = "COTAL_LAUNCH_MATERIAL"
	// The reference's user-mode launch set (an agent on a user-auth mesh); all four or none.
	EnvOwner         = "COTAL_OWNER"
	EnvActor         = "COTAL_ACTOR"
	EnvSentinelCreds = "COTAL_SENTINEL_CREDS"
	EnvBearerCmd     = "COTAL_BEARER_CMD"
)

// ServerName is the name the cotal MCP server is registered under in every harness.
const ServerName = "cotal"

// All returns the connectors, sorted by name.
func All() []Connector {
	return []Connector{claude(), codex(), command(), opencode()}
}

// Lookup returns the connector called name.
func Lookup(name string) (Connector, bool) {
	for _, c := range All() {
		if c.Name == name {
			return c, true
		}
	}
	return Connector{}, false
}

// Names returns the connector names, sorted, for messages.
func Names() []string {
	var out []string
	for _, c := range All() {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return out
}

// MCPEnv returns the environment of the agent's `cotal mcp`: its identity, the creds file
// path (never the credential) and the harness name, under the names both this `cotal mcp`
// and the reference's connectors read (config.ts configFromEnv): the read and post ACLs,
// the kind, the persona file, and the lifecycle uid beside the creds.
func (l Launch) MCPEnv(harness string) map[string]string {
	env := map[string]string{
		EnvSpace:          l.Space,
		EnvName:           l.Name,
		EnvServers:        l.Servers,
		EnvSubscribe:      strings.Join(l.Subscribe, ","),
		EnvAllowSubscribe: strings.Join(l.AllowSubscribe, ","),
		EnvAllowPublish:   strings.Join(l.AllowPublish, ","),
		EnvKind:           "agent",
		EnvHarness:        harness,
	}
	if l.Role != "" {
		env[EnvRole] = l.Role
	}
	for k, v := range map[string]string{EnvLifecycleUID: l.LifecycleUID, EnvAgentFile: l.AgentFile,
		EnvQuiet: strings.Join(l.Quiet, ","), EnvMuted: strings.Join(l.Muted, ",")} {
		if v != "" {
			env[k] = v
		}
	}
	if len(l.Capabilities) > 0 {
		env[EnvCapabilities] = strings.Join(l.Capabilities, ",")
		if l.Persona != "" {
			env[EnvGrantPersona] = l.Persona
		}
	}
	if l.CredsPath != "" {
		env[EnvCreds] = l.CredsPath
	}
	if harness == "claude" {
		env[EnvChannel] = "1"
	}
	return env
}

// check refuses a launch that misses what every connector needs.
func (l Launch) check() error {
	switch {
	case l.Name == "" || l.Name == "." || l.Name == ".." || strings.ContainsAny(l.Name, "/\\\x00"):
		return fmt.Errorf("launch %q: an agent name names its files and cannot be empty, . or .. or hold a slash", l.Name)
	case l.Exe == "":
		return fmt.Errorf("launch %s: no cotal executable for the MCP server", l.Name)
	case l.RunDir == "" || !filepath.IsAbs(l.RunDir):
		return fmt.Errorf("launch %s: the run folder must be an absolute path, got %q", l.Name, l.RunDir)
	case l.HasPrompt && strings.TrimSpace(l.Prompt) == "":
		return fmt.Errorf("--prompt is empty: there is no first turn to submit; give it text or leave it out")
	}
	return CheckModel(l.Model)
}

// MaxModelLength bounds a model name: the longest real one (a Bedrock inference-profile
// ARN) is well under it.
const MaxModelLength = 256

// CheckModel refuses a model name a harness could read as something else: one that starts
// with "-" (an option), holds a space or a control character, or is longer than
// MaxModelLength. "" (the harness's default) passes. A model reaches every harness as a
// value (--model=<m>, a TOML string), and this keeps it one.
func CheckModel(m string) error {
	switch {
	case m == "":
		return nil
	case len(m) > MaxModelLength:
		return fmt.Errorf("--model is %d bytes: a model name is at most %d", len(m), MaxModelLength)
	case strings.HasPrefix(m, "-"):
		return fmt.Errorf("--model %q starts with \"-\": a model name is never an option; name a model such as sonnet or gpt-5", m)
	}
	for _, r := range m {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("--model %q holds a space or a control character: a model name is one word such as sonnet or gpt-5", m)
		}
	}
	return nil
}

// promptFile is the persona prompt written into the run folder, or nil when there is none.
func (l Launch) promptFile() *File {
	if strings.TrimSpace(l.SystemPrompt) == "" {
		return nil
	}
	return &File{Path: filepath.Join(l.RunDir, "system-prompt.md"), Data: []byte(l.SystemPrompt)}
}

func (l Launch) getenv(k string) string {
	if l.Getenv == nil {
		return ""
	}
	return l.Getenv(k)
}
