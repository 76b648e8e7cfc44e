// Package spawn implements `cotal spawn`: run a coding agent (Claude Code, Codex, OpenCode
// or any program) in the foreground as a peer on the mesh.
package spawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	launcher "github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
	"github.com/spf13/cobra"
)

// Options are the flags of `cotal spawn`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Resolve         cmdutil.ResolveFunc
	ConnectOperator cmdutil.ConnectAsFunc // the manager's operator rail (--detach)
	AgentCreds      cmdutil.AgentCredsFunc
	Getenv          func(string) string // nil reads as an empty environment
	Getwd           func() (string, error)
	// LookPath finds a harness on PATH; Environ is the environment the harness inherits
	// (minus COTAL_*); Self is this binary, which the harness starts as `<Self> mcp`.
	LookPath func(string) (string, error)
	Environ  func() []string
	Self     func() (string, error)

	Space     string
	Server    string
	TLSCA     string // --tls-ca: the CA the mesh's TLS certificate is checked against
	Persona   string // the positional; "" means $COTAL_DEFAULT_PERSONA, else default
	Agent     string // "" means the persona's agent:, else $COTAL_DEFAULT_AGENT, else claude
	Name      string
	Role      string
	Model     string
	Prompt    string
	HasPrompt bool
	Cwd       string
	DryRun    bool
	Detach    bool     // run it in a seat of the space's agent manager
	Args      []string // after --
}

// NewCmdSpawn builds `cotal spawn`.
func NewCmdSpawn(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, ConnectOperator: f.ConnectOperator, AgentCreds: f.AgentCreds,
		Getenv: f.Getenv, Getwd: f.Getwd, LookPath: exec.LookPath, Environ: os.Environ, Self: func() (string, error) { return launcher.Self(f.Executable) }}
	cmd := &cobra.Command{
		Use:   "spawn [<persona>] [--agent claude|codex|opencode|command] [--name N] [-- ARGS...]",
		Short: "Run a coding agent in this terminal as a peer on the mesh",
		Long: `Run a coding agent in the foreground as a peer: it shows in the roster, reads its
channels and takes DMs and anycasts to its role through the cotal_* tools of ` + "`cotal mcp`" + `.

The agent is the persona .cotal/agents/<persona>.md (default: $COTAL_DEFAULT_PERSONA, else
default). On an authenticated mesh spawn mints the persona's least-privilege credential
into .cotal/run/<name>/creds (0600), writes the harness's MCP configuration pointing at
this binary's ` + "`cotal mcp`" + ` (the credential travels only as that file's path), runs the
harness with the persona's prompt added to its system prompt, and removes the credential
and the configuration when the harness exits, with the harness's exit code.

Harnesses (--agent; default: the persona's agent:, else $COTAL_DEFAULT_AGENT, else claude):
  claude     Claude Code: --mcp-config with only cotal, its channel on (a message wakes an
             idle session), the persona via --append-system-prompt-file
  codex      Codex CLI: a private CODEX_HOME in .cotal/codex/<name>/ whose config.toml
             holds [mcp_servers.cotal] and the persona as developer_instructions
  opencode   OpenCode: OPENCODE_CONFIG_CONTENT with an mcp entry for cotal and the
             persona as an instructions file
  command    any program, named after --: COTAL_MCP_CONFIG is the path of a Claude-style
             MCP configuration file that starts cotal mcp as this agent, and COTAL_SPACE,
             COTAL_NAME, COTAL_ROLE, COTAL_SERVERS, COTAL_CREDS, COTAL_SUBSCRIBE are set

Arguments after -- go to the harness (for command: the program and its arguments).
--dry-run prints the command line and the files it would write, and changes nothing.

--detach asks the space's agent manager (cotal supervise; cotal up starts one) to run the
agent in a seat of its own: spawn prints the agent's name and lifecycle uid at once, then
how it settled: succeeded (it joined the roster), failed (it exited first: its code and last
output lines; exit status 1) or uncertain (not in the roster within the manager's window;
it still runs). A seat never takes over an identity: a name derived from the persona that
anyone holds or held in the space (the operator's, the manager's, a peer in the roster, a
DM inbox of it) gets a suffix (reviewer_2), a taken --name is refused, and every seat gets
a fresh lifecycle uid. See cotal ps, stop, attach and input.`,
		Example: `  cotal spawn                                # the default persona in Claude Code
  cotal spawn reviewer --agent codex --prompt 'Review the open pull request'
  cotal spawn builder --name builder_2 --model opus
  cotal spawn --agent command --name bot -- ./my-agent --verbose
  cotal spawn reviewer --dry-run
  cotal spawn reviewer --detach`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pos := args
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				pos, opts.Args = args[:dash], args[dash:]
			}
			if len(pos) > 1 {
				return cmdutil.FlagErrorf("spawn takes one persona, got %q; arguments for the harness go after --", strings.Join(pos, " "))
			}
			if len(pos) == 1 {
				if err := workspace.CheckPersonaName(pos[0]); err != nil {
					return cmdutil.FlagErrorf("persona %v", err)
				}
				opts.Persona = pos[0]
			}
			if opts.Agent != "" {
				if _, ok := connector.Lookup(opts.Agent); !ok {
					return unknownAgent(fmt.Sprintf("--agent %q", opts.Agent))
				}
			}
			if cmd.Flags().Changed("name") && !protocol.ValidActor(opts.Name) {
				return cmdutil.RefuseUsage(fmt.Sprintf("--name %q", opts.Name),
					fmt.Sprintf("a name is 1 to %d letters, digits or _ (no dots, dashes or spaces): it becomes the agent's actor", protocol.MaxActorLength),
					"cotal spawn --name "+suggestName(opts.Name))
			}
			if cmd.Flags().Changed("role") && protocol.CheckRole(opts.Role) != nil {
				return cmdutil.RefuseUsage("--role", protocol.CheckRole(opts.Role).Error()+" (it names the anycast queue)", "cotal spawn --role reviewer")
			}
			opts.HasPrompt = cmd.Flags().Changed("prompt")
			if opts.HasPrompt && strings.TrimSpace(opts.Prompt) == "" {
				return cmdutil.RefuseUsage("an empty --prompt", "there is no first turn to submit", "cotal spawn --prompt 'Start with the open issues'")
			}
			if opts.Agent == "command" && len(opts.Args) == 0 {
				return cmdutil.RefuseUsage("--agent command without a program", "the program to run goes after --", "cotal spawn --agent command --name bot -- ./my-agent")
			}
			if opts.Detach && opts.DryRun {
				return cmdutil.FlagErrorf("--dry-run shows a foreground spawn; leave out --detach")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.Detach {
				return runDetach(cmd.Context(), opts)
			}
			return runSpawn(cmd.Context(), opts)
		},
	}
	cmdutil.SpaceVar(cmd.Flags(), &opts.Space, "space to join (default: the project's space)")
	cmd.Flags().StringVar(&opts.Server, "server", "", "NATS URL of the mesh (default: the project's running mesh)")
	cmd.Flags().StringVar(&opts.TLSCA, "tls-ca", "", "CA file (PEM) the mesh's TLS certificate is signed by (default: the one the mesh was started with, else the system's)")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "harness: "+strings.Join(connector.Names(), ", ")+" (default: the persona's agent:, else $COTAL_DEFAULT_AGENT, else claude)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "presence name (default: the persona's name)")
	cmd.Flags().StringVar(&opts.Role, "role", "", "role to serve (default: the persona's role)")
	cmd.Flags().StringVar(&opts.Model, "model", "", "model (default: the persona's model, else the harness's)")
	cmd.Flags().StringVar(&opts.Prompt, "prompt", "", "first turn, submitted when the agent starts")
	cmd.Flags().StringVar(&opts.Cwd, "cwd", "", "folder the agent works in (default: the current folder)")
	cmd.Flags().BoolVarP(&opts.Detach, "detach", "d", false, "run it in a seat of the space's agent manager: return at once, then report how it settles")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the command line and the files it would write; mint and write nothing")
	return cmd
}

// unknownAgent refuses a harness name no connector has; what names it and where it came from.
func unknownAgent(what string) error {
	return cmdutil.RefuseUsage(what, "cotal has no connector of that name; it knows "+strings.Join(connector.Names(), ", "),
		"cotal spawn --agent claude")
}

// suggestName turns s into a valid actor name for a refusal's next command.
func suggestName(s string) string {
	out := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
	if len(out) > protocol.MaxActorLength {
		out = out[:protocol.MaxActorLength]
	}
	if out == "" || !protocol.ValidActor(out) {
		return "agent_1"
	}
	return out
}
