// Package cli builds the cotal command tree and is the program's one exit point.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/a2a"
	"github.com/cotal-ai/cotal/internal/cli/actor"
	"github.com/cotal-ai/cotal/internal/cli/authservice"
	backupcmd "github.com/cotal-ai/cotal/internal/cli/backup"
	"github.com/cotal-ai/cotal/internal/cli/brokercmd"
	"github.com/cotal-ai/cotal/internal/cli/channels"
	"github.com/cotal-ai/cotal/internal/cli/claims"
	"github.com/cotal-ai/cotal/internal/cli/clean"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/console"
	"github.com/cotal-ai/cotal/internal/cli/deliver"
	"github.com/cotal-ai/cotal/internal/cli/describe"
	"github.com/cotal-ai/cotal/internal/cli/doctor"
	"github.com/cotal-ai/cotal/internal/cli/down"
	"github.com/cotal-ai/cotal/internal/cli/endpoints"
	"github.com/cotal-ai/cotal/internal/cli/ext"
	"github.com/cotal-ai/cotal/internal/cli/history"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/cli/join"
	"github.com/cotal-ai/cotal/internal/cli/login"
	"github.com/cotal-ai/cotal/internal/cli/logout"
	"github.com/cotal-ai/cotal/internal/cli/mcp"
	"github.com/cotal-ai/cotal/internal/cli/meshes"
	"github.com/cotal-ai/cotal/internal/cli/mint"
	"github.com/cotal-ai/cotal/internal/cli/personas"
	runcmd "github.com/cotal-ai/cotal/internal/cli/run"
	"github.com/cotal-ai/cotal/internal/cli/seats"
	"github.com/cotal-ai/cotal/internal/cli/send"
	"github.com/cotal-ai/cotal/internal/cli/service"
	"github.com/cotal-ai/cotal/internal/cli/setup"
	"github.com/cotal-ai/cotal/internal/cli/spawn"
	"github.com/cotal-ai/cotal/internal/cli/status"
	"github.com/cotal-ai/cotal/internal/cli/supervise"
	"github.com/cotal-ai/cotal/internal/cli/tasks"
	"github.com/cotal-ai/cotal/internal/cli/topology"
	"github.com/cotal-ai/cotal/internal/cli/up"
	"github.com/cotal-ai/cotal/internal/cli/update"
	"github.com/cotal-ai/cotal/internal/cli/use"
	"github.com/cotal-ai/cotal/internal/cli/version"
	"github.com/cotal-ai/cotal/internal/cli/web"
)

// Version is the CLI version, set at build time with -ldflags "-X ...cli.Version=v1.2.3";
// left at "dev", the module version `go install ...@version` records is used (see
// internal/cli/version).
var Version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Main runs the command line and returns the process exit code.
func Main() int {
	ios := iostreams.System()
	level := slog.LevelWarn
	if os.Getenv("COTAL_DEBUG") != "" {
		level = slog.LevelDebug
	}
	f := &cmdutil.Factory{
		IO:         ios,
		Getwd:      os.Getwd,
		Executable: os.Executable,
		Getenv:     os.Getenv,
		LookupEnv:  os.LookupEnv,
		Logger:     slog.New(cmdutil.LogHandler(ios.ErrOut, level)),
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewCmdRoot(f)
	// `cotal <name>` runs the extension cotal-<name>; --version lists the extensions too.
	if handled, err := ext.Hook(ctx, f, root, os.Args[1:]); handled {
		return report(ios.ErrOut, nil, err)
	}
	root.SetArgs(os.Args[1:])
	cmd, err := root.ExecuteContextC(ctx)
	return report(ios.ErrOut, cmd, err)
}

// report turns an error into text on stderr and an exit code.
func report(w io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var exitErr *cmdutil.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.Code
	}
	var shown *cmdutil.HelpShown
	if errors.As(err, &shown) {
		fmt.Fprintf(w, "error: %v\n", err)
		return exitUsage
	}
	var flagErr *cmdutil.FlagError
	if errors.As(err, &flagErr) || isCobraUsageError(err) {
		fmt.Fprintf(w, "error: %v\n", err)
		var r *cmdutil.Refusal
		if cmd != nil && (!errors.As(err, &r) || r.Next == "") { // a refusal ends with its next command
			fmt.Fprintf(w, "see `%s --help`\n", cmd.CommandPath())
		}
		return exitUsage
	}
	fmt.Fprintf(w, "✗ %v\n", err)
	return exitError
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	info := version.Read(Version)
	root := &cobra.Command{
		Use:   "cotal <command>",
		Short: "Cotal: a shared space where AI agents and people see each other and talk",
		Long: `cotal turns NATS + JetStream into a shared space for teams of agents: peers see each
other's presence and message three ways: multicast to a channel, durable unicast to one
peer, anycast to whoever holds a role.`,
		Example: `  cotal up --detach               # start an embedded broker in the background
  cotal join --name alice         # be a peer; type lines to post, /help for commands
  cotal send dm alice "hello"     # one-shot direct message
  cotal status                    # who is here, on which channels
  cotal down                      # stop the broker`,
		Version:       info.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetUsageTemplate(root.UsageTemplate() + exitCodesHelp)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.FlagError{Err: err} })
	// --version has no -v: -v means --verbose wherever a command has it (personas list).
	root.Flags().Bool("version", false, "print cotal's version (cotal version says more)")
	root.AddCommand(
		up.NewCmdUp(f, nil),
		down.NewCmdDown(f, nil),
		endpoints.NewCmdEndpoints(f, nil),
		describe.NewCmdDescribe(f, nil),
		topology.NewCmdTopology(f, nil),
		join.NewCmdJoin(f, nil),
		send.NewCmdSend(f, nil),
		status.NewCmdStatus(f, nil),
		doctor.NewCmdDoctor(f, info.Version, nil),
		claims.NewCmdClaims(f, nil),
		console.NewCmdConsole(f, nil),
		ext.NewCmdExt(f, nil),
		setup.NewCmdSetup(f, nil),
		update.NewCmdUpdate(f, nil),
		personas.NewCmdPersonas(f),
		mint.NewCmdMint(f, nil),
		deliver.NewCmdDeliver(f, nil),
		channels.NewCmdChannels(f, nil),
		tasks.NewCmdTasks(f, nil),
		actor.NewCmdActor(f, nil),
		authservice.NewCmdAuthService(f, nil),
		login.NewCmdLogin(f, nil),
		meshes.NewCmdMeshes(f),
		mcp.NewCmdMCP(f, info.Version, nil),
		spawn.NewCmdSpawn(f, nil),
		supervise.NewCmdSupervise(f, nil),
		service.NewCmdService(f, nil),
		seats.NewCmdPs(f, nil),
		seats.NewCmdStop(f, nil),
		seats.NewCmdInput(f, nil),
		seats.NewCmdAttach(f, nil),
		web.NewCmdWeb(f, nil),
		brokercmd.NewCmdBroker(f),
		backupcmd.NewCmdBackup(f),
		version.NewCmdVersion(f, info, nil),
		clean.NewCmdClean(f, nil),
		history.NewCmdHistory(f, nil),
		logout.NewCmdLogout(f, nil),
		use.NewCmdUse(f, nil),
		runcmd.NewCmdRun(f),
		a2a.NewCmdA2A(f, nil),
	)
	strictHelp(root)
	completePersonas(f, root)
	return root
}

// completePersonas completes persona names (the project's .cotal/agents/<name>.md) for
// every --persona flag, and the persona argument (and --name) of spawn, personas show and
// personas rm.
func completePersonas(f *cmdutil.Factory, root *cobra.Command) {
	names := cmdutil.Complete(-1, f.PersonaNames)
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		if c.Flags().Lookup("persona") != nil {
			_ = c.RegisterFlagCompletionFunc("persona", names)
		}
		switch c.CommandPath() {
		case "cotal personas show", "cotal personas rm":
			_ = c.RegisterFlagCompletionFunc("name", names)
			fallthrough
		case "cotal spawn":
			c.ValidArgsFunction = cmdutil.Complete(0, f.PersonaNames)
		}
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(root)
}

// strictHelp makes `cotal help <topic>` and `cotal completion <shell>` usage errors (exit
// 2) for a topic or shell that does not exist, where cobra prints help and exits 0; and
// `cotal completion` alone prints its help like every command group.
func strictHelp(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			cmdutil.Group(c)
			c.Example = `  source <(cotal completion bash)                     # this bash session
  cotal completion zsh > "${fpath[1]}/_cotal"         # every zsh session`
			for _, sh := range c.Commands() {
				sh.Example = completionExamples[sh.Name()]
			}
		case "help":
			c.Example = `  cotal help up
  cotal help send dm`
			show := c.Run
			c.Run = nil
			c.RunE = func(c *cobra.Command, args []string) error {
				found, rest, err := c.Root().Find(args)
				if err != nil || found == nil || len(rest) > 0 {
					return cmdutil.RefuseUsage(fmt.Sprintf("help topic %q", strings.Join(args, " ")), "cotal has no such command", "cotal --help")
				}
				show(c, args)
				return nil
			}
		}
	}
}

// exitCodesHelp ends every command's --help.
const exitCodesHelp = `
Exit codes: 0 done; 1 failed or refused; 2 a usage error (a bad flag, argument or name,
or a command group run without its command).
`

// completionExamples are the examples of `cotal completion <shell>`.
var completionExamples = map[string]string{
	"bash": `  source <(cotal completion bash)
  cotal completion bash > /etc/bash_completion.d/cotal`,
	"zsh": `  source <(cotal completion zsh)
  cotal completion zsh > "${fpath[1]}/_cotal"`,
	"fish": `  cotal completion fish | source
  cotal completion fish > ~/.config/fish/completions/cotal.fish`,
	"powershell": `  cotal completion powershell | Out-String | Invoke-Expression
  cotal completion powershell >> $PROFILE`,
}

// isCobraUsageError recognises cobra's own argument and command errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
