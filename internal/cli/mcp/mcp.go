// Package mcp implements `cotal mcp`: one agent on a space as a Model Context Protocol
// server on stdio, giving the model the cotal_* tools.
package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Environment variables a launcher sets instead of flags; a flag beats its variable.
const (
	EnvSpace     = "COTAL_SPACE"
	EnvName      = "COTAL_NAME"
	EnvRole      = "COTAL_ROLE"
	EnvServers   = "COTAL_SERVERS"   // comma-separated NATS URLs
	EnvCreds     = "COTAL_CREDS"     // path of a creds file
	EnvSubscribe = "COTAL_SUBSCRIBE" // comma-separated channels
	EnvPersona   = "COTAL_PERSONA"
	EnvHarness   = "COTAL_HARNESS" // claude, codex, opencode or command: shown in presence
	EnvChannel   = "COTAL_CHANNEL" // 1: wake Claude Code with channel notifications
	// EnvCapabilities is the persona's capabilities, comma-separated, as a launcher sets
	// it: with spawn the manager tools are listed (a --persona's come from its file).
	EnvCapabilities = "COTAL_CAPABILITIES"
	// EnvGrantPersona names the persona file whose grant bounds the personas the agent
	// defines with cotal_persona (a launcher sets it; default the agent's name).
	EnvGrantPersona = "COTAL_GRANT_PERSONA"
)

// Harnesses are the values COTAL_HARNESS may take.
var Harnesses = []string{"claude", "codex", "opencode", "command"}

// Options are the flags of `cotal mcp`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Resolve    cmdutil.ResolveFunc
	Connect    cmdutil.ConnectFunc
	AgentCreds cmdutil.AgentCredsFunc
	Logger     *slog.Logger // nil means discard

	Mesh     cmdutil.MeshFlags
	Name     string
	Role     string
	Channels []string
	Persona  string
	Harness  string
	Push     bool // COTAL_CHANNEL=1
	// Capabilities are COTAL_CAPABILITIES (a --persona's come from its file).
	Capabilities []string
	// GrantPersona is COTAL_GRANT_PERSONA.
	GrantPersona string
	// ReconnectFor is how long a lost mesh is waited for before the server exits non-zero.
	ReconnectFor time.Duration
	// LifecycleUID is COTAL_LIFECYCLE_UID: the incarnation the creds were minted for.
	LifecycleUID string
	// AllowSubscribe and AllowPublish are COTAL_ALLOW_SUBSCRIBE and COTAL_ALLOW_PUBLISH
	// (or an agent file's): the read ACL bounds the boot joins, and both bound the
	// credential a --name agent is minted on a project's authenticated mesh.
	AllowSubscribe, AllowPublish []string
	// Model and Variant are COTAL_MODEL and COTAL_VARIANT, shown on the card.
	Model, Variant string
	agentFile      *workspace.Persona // COTAL_AGENT_FILE's persona, nil when unset
	aclSet         bool               // the env or an agent file named the ACLs (even empty ones)
	channelsSet    bool               // --channel or COTAL_SUBSCRIBE was given
	fromEnvVar     map[string]string  // flag name -> the environment variable that set it
	// Version is told to the MCP client.
	Version string
}

// NewCmdMCP builds `cotal mcp`.
func NewCmdMCP(f *cmdutil.Factory, version string, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.Connect, AgentCreds: f.AgentCreds, Logger: f.Logger, Version: version}
	cmd := &cobra.Command{
		Use:   "mcp (--name N [--role R] | --persona P | --creds FILE) [--channel C]...",
		Short: "Serve the cotal_* tools to an AI agent over MCP (stdio)",
		Long: `Put one AI agent on a space as a Model Context Protocol server on stdin/stdout. The
agent's harness (Claude Code, Codex, OpenCode, any MCP client) starts it and gets the
cotal_* tools: orientation, roster, inbox, send, dm, anycast, status, channels,
channel_info, join, leave, connection_status, channel_mode, docs, feedback and reconnect,
with the reference implementation's names and arguments (docs/agents.md). Stdout carries
only MCP frames; logs go to stderr.

Who the agent is, as for cotal join: --name (with --role), --persona (the agent of
.cotal/agents/<name>.md, with its own least-privilege credential), or --creds FILE. Each
flag has an environment variable a launcher sets, and a flag beats its variable:
  COTAL_SPACE, COTAL_NAME, COTAL_ROLE, COTAL_PERSONA, COTAL_CREDS (a creds file path),
  COTAL_SERVERS (comma-separated NATS URLs), COTAL_SUBSCRIBE (comma-separated channels),
  COTAL_HARNESS (claude|codex|opencode|command, shown in presence),
  COTAL_CHANNEL=1 (wake Claude Code with channel notifications; Claude Code does not
  declare that it takes them), COTAL_CAPABILITIES (the persona's capabilities, comma-separated).
cotal_feedback posts to COTAL_FEEDBACK_URL when set, else (as the reference does) to the
Cotal project's intake on the internet, with COTAL_FEEDBACK_KEY as a bearer, or a contact
address from COTAL_FEEDBACK_EMAIL.
The reference implementation's launchers' names are read too (see docs/interop.md):
  COTAL_LAUNCH_MATERIAL (a 0600 JSON file with servers and creds; refused beside
  COTAL_CREDS, COTAL_SERVERS or the other direct variables), COTAL_AGENT_FILE (a persona
  file: name, role, channels, ACLs; refused when COTAL_PERSONA names another),
  COTAL_ALLOW_SUBSCRIBE and COTAL_ALLOW_PUBLISH (read and post ACLs, comma-separated; the
  channels must lie within the read ACL), COTAL_LIFECYCLE_UID (must be the creds' own),
  COTAL_QUIET and COTAL_MUTED (checked: concrete channels within the read ACL),
  COTAL_KIND (agent), COTAL_MODEL and COTAL_VARIANT (shown on the card). A user-mode launch
  (COTAL_OWNER, COTAL_ACTOR, COTAL_SENTINEL_CREDS, COTAL_BEARER_CMD) is refused.
With no channel named anywhere the agent joins none: it is DM-only.

An agent whose persona has the spawn capability (capabilities: [spawn] in its file, or
COTAL_CAPABILITIES=spawn from the launcher) also gets the manager tools: cotal_spawn and
cotal_despawn start and stop teammates through the space's agent manager, cotal_personas
lists the personas and cotal_persona defines one within the agent's own grant.

Messages for the agent wait in its inbox until a cotal_inbox result carrying them was
written to the client: only then is a copy acked, so a killed server, or a client that
dropped a wake-up, loses nothing. A channel push only tells the model who sent what. The agent is in the
roster while the server runs and goes offline when the client closes stdin. One name has
one live session: a second cotal mcp of a name whose session still runs is refused at
start, and the first keeps its messages.`,
		Example: `  claude mcp add cotal -- cotal mcp --name builder --role builder
  COTAL_NAME=reviewer COTAL_SUBSCRIBE=general,review cotal mcp
  cotal mcp --persona builder`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.fromEnv(cmd.Flags(), f.Getenv, f.Lookup); err != nil {
				return err
			}
			switch {
			case opts.Persona != "" && (opts.Name != "" || opts.Role != "" || opts.Mesh.Creds != ""):
				return cmdutil.FlagErrorf("--persona sets the name, role and credential: drop --name, --role and --creds (or COTAL_NAME, COTAL_ROLE, COTAL_CREDS)")
			case opts.Name == "" && opts.Persona == "" && opts.Mesh.Creds == "":
				return cmdutil.FlagErrorf("--name is required: the name peers see and address the agent by, e.g. --name builder (or COTAL_NAME, --persona P, --creds FILE)")
			}
			if opts.Name != "" && !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("%s: use 1 to %d letters, digits or _ (no dots, dashes or spaces)", opts.source("name", opts.Name), protocol.MaxActorLength)
			}
			if opts.Role != "" {
				if err := protocol.CheckRole(opts.Role); err != nil {
					return cmdutil.FlagErrorf("%s: %v", opts.source("role", opts.Role), err)
				}
			}
			if opts.Mesh.Space != "" {
				if err := protocol.CheckSpace(opts.Mesh.Space); err != nil {
					return cmdutil.FlagErrorf("space %q: %v", opts.Mesh.Space, err)
				}
			}
			for _, ch := range opts.Channels {
				if err := protocol.CheckChannelPattern(ch); err != nil {
					return cmdutil.FlagErrorf("%s: %v", opts.source("channel", strings.Join(opts.Channels, ",")), err)
				}
			}
			if opts.Harness != "" && !contains(Harnesses, opts.Harness) {
				return cmdutil.FlagErrorf("%s=%q: want one of %s", EnvHarness, opts.Harness, strings.Join(Harnesses, ", "))
			}
			if opts.ReconnectFor <= 0 {
				return cmdutil.FlagErrorf("--reconnect-for %s: want a positive duration, e.g. 1m", opts.ReconnectFor)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runMCP(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.Name, "name", "", "the agent's name on the space ($COTAL_NAME)")
	cmd.Flags().StringVar(&opts.Role, "role", "", "a role to serve: anycasts to it may come to the agent ($COTAL_ROLE)")
	cmd.Flags().StringArrayVar(&opts.Channels, "channel", nil, "channel to join (repeatable; $COTAL_SUBSCRIBE, comma-separated; default a --persona's subscribe list, else none: DM-only)")
	cmd.Flags().StringVar(&opts.Persona, "persona", "", "be the agent of .cotal/agents/<name>.md ($COTAL_PERSONA)")
	cmd.Flags().DurationVar(&opts.ReconnectFor, "reconnect-for", time.Minute, "how long to wait for a lost mesh to come back before exiting non-zero")
	return cmd
}

// fromEnv fills what no flag set from the environment. COTAL_SUBSCRIBE set to "" is an
// empty read set (a persona with `subscribe: []`), not an unset one.
func (o *Options) fromEnv(fs *pflag.FlagSet, getenv func(string) string, lookup func(string) (string, bool)) error {
	if getenv == nil {
		return nil
	}
	o.fromEnvVar = map[string]string{}
	str := func(flag, env string, p *string) {
		if !fs.Changed(flag) {
			if v := getenv(env); v != "" {
				*p, o.fromEnvVar[flag] = v, env
			}
		}
	}
	if !fs.Changed("space") {
		if v := getenv(EnvSpace); v != "" {
			if err := protocol.CheckSpace(v); err != nil {
				return cmdutil.FlagErrorf("%s=%q: %v", EnvSpace, v, err)
			}
			o.Mesh.Space = v
		}
	}
	str("name", EnvName, &o.Name)
	str("role", EnvRole, &o.Role)
	str("creds", EnvCreds, &o.Mesh.Creds)
	str("persona", EnvPersona, &o.Persona)
	if !fs.Changed("server") {
		if v := getenv(EnvServers); v != "" && getenv(connector.EnvLaunchMaterial) == "" {
			o.Mesh.Server = strings.Join(splitList(v), ",")
		}
	}
	o.channelsSet = fs.Changed("channel")
	if !o.channelsSet {
		if v, ok := lookup(EnvSubscribe); ok {
			o.Channels, o.channelsSet = splitList(v), true
			o.fromEnvVar["channel"] = EnvSubscribe
		}
	}
	o.Harness = getenv(EnvHarness)
	o.Capabilities = splitList(getenv(EnvCapabilities))
	for _, c := range o.Capabilities {
		if err := workspace.CheckCapability(c); err != nil {
			return cmdutil.FlagErrorf("%s: %v", EnvCapabilities, err)
		}
	}
	o.GrantPersona = getenv(EnvGrantPersona)
	switch v := getenv(EnvChannel); v {
	case "", "0", "false":
	case "1", "true":
		o.Push = true
	default:
		return cmdutil.FlagErrorf("%s=%q: want 1 or 0", EnvChannel, v)
	}
	return o.refEnv(fs, getenv, lookup)
}

// source names where the value of flag came from, for an error: `COTAL_NAME="a.b"` when
// the environment set it, `--name "a.b"` when the flag did.
func (o *Options) source(flag, value string) string {
	if env := o.fromEnvVar[flag]; env != "" {
		return fmt.Sprintf("%s=%q", env, value)
	}
	return fmt.Sprintf("--%s %q", flag, value)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// acl is a --name agent's ACL: exactly what the launcher (COTAL_ALLOW_*, an agent file)
// named, even none; every channel (">") when it named no ACL at all.
func (o *Options) acl(list []string) []string {
	if o.aclSet {
		if list == nil {
			return []string{}
		}
		return list
	}
	return []string{">"}
}

// checkUID refuses a COTAL_LIFECYCLE_UID other than the one the creds file was minted for.
func (o *Options) checkUID() error {
	if o.LifecycleUID == "" || o.Mesh.Creds == "" {
		return nil
	}
	b, err := cmdutil.ReadCredsFile("--creds", o.Mesh.Creds)
	if err != nil {
		return err
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		return fmt.Errorf("creds %s: %w", o.Mesh.Creds, err)
	}
	return checkCredsUID(o.LifecycleUID, c.LifecycleUID)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func runMCP(ctx context.Context, opts *Options) error {
	target, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	log := opts.Logger
	ep, err := connect(ctx, opts, &target)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer ep.Close()
	srv := &agentmcp.Server{
		Endpoint: ep, Channels: opts.Channels, Channel: opts.Push, Version: opts.Version, Logger: log,
		Manager: managerTools(opts, target, ep),
		Turns:   &mgrclient.Client{NC: ep.Conn(), Space: ep.Space(), Caller: ep.Principal()},
	}
	if target.Project != nil {
		srv.Repo = target.Project.Root // file claims are relative to the project
	}
	t := &sdk.IOTransport{Reader: io.NopCloser(opts.IO.In), Writer: nopWriteCloser{opts.IO.Out}}
	runErr := srv.Run(ctx, t)
	closeErr := ep.Close()
	if runErr != nil {
		return runErr
	}
	if closeErr != nil && ctx.Err() == nil {
		log.Warn("leave", "err", closeErr)
	}
	return nil
}

// managerTools are the manager tools of an agent with the spawn capability, nil for any
// other. The agent's own grant, which a persona it defines stays within, is its
// persona's: --persona's, else COTAL_GRANT_PERSONA's (a seat named reviewer_2 runs persona
// reviewer), else the project's persona file named like the agent; unknown otherwise
// (cotal_persona then refuses). It bounds only what cotal_persona writes: the manager
// checks the spawner's real grant again at each spawn.
func managerTools(opts *Options, target cmdutil.Target, ep *client.Endpoint) *agentmcp.Manager {
	if !contains(opts.Capabilities, trust.CapabilitySpawn) {
		return nil
	}
	_, operator := cmdutil.OperatorIdentity()
	m := &agentmcp.Manager{
		Client:   &mgrclient.Client{NC: ep.Conn(), Space: ep.Space(), Caller: ep.Principal()},
		Project:  target.Project,
		Reserved: []string{operator, "manager"},
	}
	name := opts.Persona
	if name == "" {
		name = opts.GrantPersona
	}
	if name == "" {
		name = ep.Principal().Actor
	}
	if target.Project != nil {
		if per, err := target.Project.Persona(name); err == nil {
			g := workspace.GrantOf(per)
			m.Grant = &g
		}
	}
	return m
}

// The ack wait of the DM durables cotal mcp creates (an open mesh; on an authenticated
// one the provisioner makes them with the same wait): a killed server's copies come back
// to the next one within it. The endpoint keeps the copies it holds from redelivery until
// then (client.Incoming.InProgress).
const ackWait = provision.AckWait

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mintsAgent reports whether a --name agent connects with an agent credential minted from
// the project's keys: on a project's own authenticated mesh with static creds. Elsewhere
// it connects as cotal join --name does (an open mesh; a user-auth space, where it signs
// in; a creds file).
func mintsAgent(t cmdutil.Target) bool {
	return t.Auth() && t.Project != nil && t.Remote == nil && t.Creds == "" && t.CredsData == nil &&
		cmdutil.CheckStatic(t, "an agent credential") == nil
}

// projectCwd is the working directory relative to the project's root ("." at the root),
// or "" outside a project: a full path, which may name the user's home, is never
// published in presence.
func projectCwd(t cmdutil.Target) string {
	if t.Project == nil {
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(t.Project.Root, wd)
	if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// connect connects as the identity the options name: a persona (its own least-privilege
// credential on an authenticated mesh), a creds file, or a name; the card records the
// harness.
func connect(ctx context.Context, opts *Options, target *cmdutil.Target) (*client.Endpoint, error) {
	meta := map[string]any{}
	for k, v := range map[string]string{"connector": opts.Harness, "model": opts.Model, "variant": opts.Variant} {
		if v != "" {
			meta[k] = v
		}
	}
	if cwd := projectCwd(*target); cwd != "" {
		meta["cwd"] = cwd // the reference's reserved key, relative: never a full (home) path
	}
	if len(meta) == 0 {
		meta = nil
	}
	if err := opts.checkUID(); err != nil {
		return nil, err
	}
	if opts.Persona == "" {
		cfg := client.Config{Name: opts.Name, Role: opts.Role, Kind: protocol.CardAgent, Meta: meta, ReconnectFor: opts.ReconnectFor, AckWait: ackWait, SoleSession: true,
			LifecycleUID: opts.LifecycleUID}
		if !mintsAgent(*target) {
			return opts.Connect(ctx, *target, cfg, cmdutil.As{Profile: trust.ProfileProvisioner, Join: true, Person: true})
		}
		// An AI agent named on a project's authenticated mesh gets an agent credential, not
		// the operator's: it reads and posts on any channel but cannot mint, administer or
		// read another's mail.
		creds, err := opts.AgentCreds(ctx, *target, trust.UserSpec{Name: opts.Name, Profile: trust.ProfileAgent,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: opts.Name}, Role: opts.Role,
			Subscribe: opts.Channels, AllowSubscribe: opts.acl(opts.AllowSubscribe), AllowPublish: opts.acl(opts.AllowPublish), LifecycleUID: opts.LifecycleUID})
		if err != nil {
			return nil, err
		}
		target.CredsData = creds
		return opts.Connect(ctx, *target, cfg, cmdutil.As{})
	}
	if target.Project == nil {
		return nil, cmdutil.Refuse("--persona outside a project", "personas live in a project's .cotal/agents/", "cotal personas list")
	}
	per, err := target.Project.Persona(opts.Persona)
	if err != nil {
		return nil, err
	}
	if !opts.channelsSet {
		opts.Channels = per.BootSet()
	}
	if note := per.DMOnlyNote(); note != "" {
		fmt.Fprintln(opts.IO.ErrOut, note) // stderr: the client's log, never an MCP frame
	}
	opts.Capabilities = per.Capabilities
	cfg := client.Config{Name: per.Name, Role: per.Role, Kind: protocol.CardAgent, Description: per.Description, Meta: meta, ReconnectFor: opts.ReconnectFor, AckWait: ackWait,
		LifecycleUID: opts.LifecycleUID,
		SoleSession:  true} // a second session of an AI agent would split its DMs: refused
	if !target.Auth() {
		return opts.Connect(ctx, *target, cfg, cmdutil.As{})
	}
	creds, err := opts.AgentCreds(ctx, *target, trust.UserSpec{Name: per.Name, Profile: trust.ProfileAgent,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: per.Name}, Role: per.Role,
		Subscribe: per.Subscribe, AllowSubscribe: per.ReadACL(), AllowPublish: per.AllowPublish,
		Capabilities: per.Capabilities})
	if err != nil {
		return nil, err
	}
	target.CredsData = creds
	return opts.Connect(ctx, *target, cfg, cmdutil.As{})
}
