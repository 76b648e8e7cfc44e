// Package supervise implements `cotal supervise`: the agent manager of one space in the
// foreground.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
	"github.com/spf13/cobra"
)

// ManagerName is the manager's presence name and actor.
const ManagerName = "manager"

// WindowEnv overrides the spawn readiness window (a Go duration), for tests.
const WindowEnv = "COTAL_SPAWN_WINDOW"

// Options are the flags of `cotal supervise`.
type Options struct {
	IO      *iostreams.IOStreams
	Version string // cotal's version, announced in the manager's presence card (meta "version")
	// From the Factory: only run calls them.
	Resolve    cmdutil.ResolveFunc
	Connect    cmdutil.ConnectFunc
	AgentCreds cmdutil.AgentCredsFunc
	Getenv     func(string) string // nil reads as an empty environment
	Getwd      func() (string, error)
	Executable func() (string, error)
	DaemonLog  func() slog.Handler

	Space   string
	Server  string
	TLSCA   string // --tls-ca: the CA the mesh's TLS certificate is checked against
	Pidfile string
	Wait    bool
}

// NewCmdSupervise builds `cotal supervise`.
func NewCmdSupervise(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.Connect, AgentCreds: f.AgentCreds,
		Getenv: f.Getenv, Getwd: f.Getwd, Executable: f.Executable, DaemonLog: f.DaemonLog}
	cmd := &cobra.Command{
		Use:   "supervise [--space S] [--server URL] [--wait]",
		Short: "Run the agent manager of a space in the foreground",
		Long: `Run the agent manager of one space: a peer named manager that runs agents in seats (each
in a pseudo-terminal, with the connectors of cotal spawn, its credential 0600 in
.cotal/run/<name>/ and its output in .cotal/logs/agents/<name>.log) and answers cotal spawn
--detach, ps, stop, attach and input over the mesh, as the NATS micro service cotal-manager.

One manager serves a space per host: it holds the row lease.<host> of the space's manager
lease bucket (10 s, renewed every few seconds). A second one refuses and names the holder,
or with --wait waits for the lease; one whose holder was killed takes over at once and
adopts the seats still running. It prints one line when it serves and, on SIGTERM or
Ctrl-C, stops its seats (SIGTERM, then SIGKILL after 10 s) and releases its lease.

cotal up starts one per space and restarts it when it exits; cotal down manager holds it
down. It connects with the project's own keys, which also mint its seats' credentials, so
it takes no --creds; --tls-ca names the CA of a mesh on TLS.`,
		Example: `  cotal supervise
  cotal supervise --space team --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Version = cmd.Root().Version
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSupervise(cmd.Context(), opts)
		},
	}
	cmdutil.SpaceVar(cmd.Flags(), &opts.Space, "space to serve (default: the project's space)")
	cmd.Flags().StringVar(&opts.Server, "server", "", "NATS URL of the mesh (default: the project's running mesh)")
	cmd.Flags().StringVar(&opts.TLSCA, "tls-ca", "", "CA file (PEM) the mesh's TLS certificate is signed by (default: the one the mesh was started with, else the system's)")
	cmd.Flags().StringVar(&opts.Pidfile, "pidfile", "", "write this pidfile once serving (cotal up sets it)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "wait for the lease when another manager holds it, instead of refusing")
	return cmd
}

// Unsupported refuses the agent manager on a system where it cannot run its seats: each
// seat is a harness on a pseudo-terminal of its own, which cotal has on Unix only. nil
// elsewhere.
func Unsupported(goos string) error {
	if goos != "windows" {
		return nil
	}
	return cmdutil.Refuse("cotal supervise on "+goos,
		"the agent manager runs each seat on a pseudo-terminal of its own, which cotal supports on Linux and macOS only",
		"cotal spawn  # runs one agent in this terminal, no manager needed")
}

func runSupervise(ctx context.Context, opts *Options) error {
	if err := Unsupported(runtime.GOOS); err != nil {
		return err
	}
	t, err := opts.Resolve(cmdutil.MeshFlags{Space: opts.Space, Server: opts.Server, TLSCA: opts.TLSCA})
	if err != nil {
		return err
	}
	if t.Project == nil {
		wd, err := opts.Getwd()
		if err != nil {
			return fmt.Errorf("current folder: %w", err)
		}
		return cmdutil.Refuse("a supervisor outside a project",
			"personas and the seats' run files live in a project's .cotal/; make a project folder and run the supervisor from there",
			cmdutil.NewProjectNext(wd, ""))
	}
	ctx, stopWatch, err := cmdutil.WithParent(ctx, opts.Getenv)
	if err != nil {
		return err
	}
	defer stopWatch()
	exe, err := launch.Self(opts.Executable)
	if err != nil {
		return fmt.Errorf("find the cotal executable for the agents' MCP server: %w", err)
	}
	window := time.Duration(0)
	if v := getenv(opts.Getenv, WindowEnv); v != "" {
		if window, err = time.ParseDuration(v); err != nil || window <= 0 {
			return cmdutil.RefuseUsage("$"+WindowEnv+" "+v, "it is not a positive duration", "export "+WindowEnv+"=30s")
		}
	}
	log := slog.New(opts.DaemonLog())
	m := &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			cfg := client.Config{Name: ManagerName, Actor: ManagerName, Kind: protocol.CardEndpoint,
				Description: "agent manager", Meta: map[string]any{"service": protocol.ManagerServiceName, "version": opts.Version}}
			if !t.Auth() {
				return opts.Connect(ctx, t, cfg, cmdutil.As{Join: true})
			}
			// Its credential is minted with its durables made by the project's provisioner,
			// as an agent's is.
			creds, err := opts.AgentCreds(ctx, t, trust.UserSpec{Name: ManagerName, Profile: trust.ProfileManager,
				Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: ManagerName}})
			if err != nil {
				return nil, err
			}
			mt := t
			mt.CredsData = creds
			return opts.Connect(ctx, mt, cfg, cmdutil.As{})
		},
		Project: t.Project, Space: t.Space, Servers: t.Server, Auth: t.Auth(), Exe: exe, Wait: opts.Wait,
		Operator: operator(),
		Mint: func(ctx context.Context, spec trust.UserSpec) ([]byte, error) {
			return opts.AgentCreds(ctx, t, spec)
		},
		Getenv: opts.Getenv, Window: window, Logger: log,
	}
	pid := &cmdutil.Pidfile{Path: opts.Pidfile}
	defer pid.Remove(opts.IO.ErrOut)
	var readyErr error
	err = m.Run(ctx, func() {
		readyErr = pid.Write()
		fmt.Fprintf(opts.IO.Out, "✓ manager up (space %s)\n", t.Space)
		if rerr := cmdutil.SignalReady(opts.Getenv, "manager "+t.Space); rerr != nil {
			fmt.Fprintf(opts.IO.ErrOut, "! %v\n", rerr)
		}
	})
	switch {
	case errors.Is(err, manager.ErrLeaseHeld):
		return cmdutil.Refuse("a second manager for space "+t.Space, err.Error(), leaseHeldNext(t))
	case err != nil:
		return err
	case readyErr != nil:
		return readyErr
	case errors.Is(context.Cause(ctx), cmdutil.ErrParentGone):
		return fmt.Errorf("manager of space %s stopped: %w", t.Space, cmdutil.ErrParentGone)
	}
	fmt.Fprintf(opts.IO.ErrOut, "manager of space %s stopped; its seats are stopped and its lease released\n", t.Space)
	return nil
}

// operator is the principal of the person at the keyboard, as cotal spawn --detach, ps,
// stop, attach and input connect: the only caller the manager answers on its operator rail.
func operator() protocol.Principal {
	_, actor := cmdutil.OperatorIdentity()
	return protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
}

// leaseHeldNext: on the project's own mesh, stop the manager cotal up supervises; else
// wait for the holder, on the same mesh.
func leaseHeldNext(t cmdutil.Target) string {
	if d, ok := workspace.DaemonNamed("manager"); ok && t.OnProjectMesh() {
		if rec, err := workspace.ReadPidfile(d.PidFile(t.Project, t.Space)); err == nil {
			if alive, _ := rec.Alive(); alive {
				return "cotal down manager --space " + t.Space + " && cotal supervise --space " + t.Space
			}
		}
	}
	return "cotal supervise --space " + t.Space + cmdutil.ElsewhereArgs(t) + " --wait"
}

func getenv(get func(string) string, k string) string {
	if get == nil {
		return ""
	}
	return get(k)
}
