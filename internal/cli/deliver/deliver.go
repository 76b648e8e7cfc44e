// Package deliver implements `cotal deliver`: the delivery daemon of one space in the
// foreground, and `cotal deliver pending`, a read-only view of one recipient's held messages.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// DaemonPrincipal is the identity a delivery credential minted on the fly carries.
var DaemonPrincipal = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_delivery"}

// Options are the flags of `cotal deliver`.
type Options struct {
	IO        *iostreams.IOStreams
	Resolve   cmdutil.ResolveFunc
	Getenv    func(string) string
	DaemonLog func() slog.Handler                                  // the daemon's log handler (COTAL_DEBUG)
	Mint      func(cmdutil.Target, trust.UserSpec) ([]byte, error) // a credential minted on the fly

	Mesh        cmdutil.MeshFlags
	SystemCreds string
	EvictCreds  string
	Pidfile     string
	Wait        bool
	BrokerGone  time.Duration
	Shards      int
	Spaces      string // --spaces: a version 1 or 2 space manifest; one delivery lane per space
	Version     string // cotal's version, written in the lease row (cotal endpoints shows it)
}

// NewCmdDeliver builds `cotal deliver` and `cotal deliver pending`.
func NewCmdDeliver(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Getenv: f.Getenv, DaemonLog: f.DaemonLog, Mint: f.Mint}
	cmd := &cobra.Command{
		Use:   "deliver --space S | --spaces MANIFEST [--server URL] [--creds FILE]",
		Short: "Run the delivery daemon of a space in the foreground",
		Long: `Run the delivery daemon of one space: the durable backstop of durable channels. Every
post on a durable channel is copied, in order, to the durable hand-off of each member that
joined it durably and may read it; a member that was away gets every post it missed, once,
when it returns. @mentions on live channels get a durable copy too. The daemon also answers
the delivery probe and the liveness oracle of the space.

One daemon serves a space: it holds the space's lease (30 s, renewed every 15 s). A second
one refuses and names the holder, or with --wait waits for the lease. It prints one line
when it serves, exits by itself when the broker has been gone for 15 s, and exits 0 on
SIGTERM or Ctrl-C after releasing its lease.

Without --creds it mints its own credential (profile delivery) from the project's keys.

With --spaces MANIFEST one process runs a delivery lane per space the manifest names:
version 1 lists names, {"version": 1, "spaces": ["alpha", "beta"]}; version 2 lists
objects, {"version": 2, "spaces": [{"space": "alpha"}]}, each holding "space" only here.
It serves the spaces it can, names each one it cannot with the reason and retries those
every 5 s (its ready line names them), follows changes of the manifest (and reloads it on
SIGHUP), and writes MANIFEST.applied, the SHA-256 of the manifest it applied, once every
space the manifest no longer names has stopped. --creds is then a folder holding
<space>.creds for each space; without it each lane mints its own.

One daemon started by cotal up serves each space of an authenticated mesh already: to run
one by hand instead, stop that one first (cotal down delivery --space S).`,
		Example: `  cotal deliver --space team
  cotal deliver --space team --server nats://127.0.0.1:4222 --creds delivery.creds
  cotal deliver --spaces spaces.json
  cotal deliver pending bob`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Version = cmd.Root().Version
			if opts.Shards != 1 {
				next := "cotal deliver"
				if opts.Mesh.Space != "" && protocol.CheckSpace(opts.Mesh.Space) == nil {
					next += " --space " + opts.Mesh.Space
				}
				return cmdutil.RefuseUsage(fmt.Sprintf("--shards %d", opts.Shards), "the delivery daemon runs as one instance per space", next)
			}
			if opts.Mesh.Space != "" {
				if err := protocol.CheckSpace(opts.Mesh.Space); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if opts.BrokerGone < 0 {
				return cmdutil.FlagErrorf("--broker-gone %s: want a positive duration", opts.BrokerGone)
			}
			if opts.Spaces != "" {
				for _, f := range []string{"space", "wait", "pidfile"} {
					if cmd.Flags().Changed(f) {
						return cmdutil.FlagErrorf("--%s does not go with --spaces", f)
					}
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.Spaces != "" {
				return runDeliverSpaces(cmd.Context(), opts)
			}
			return runDeliver(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&opts.SystemCreds, "system-creds", "", "a system-account creds file for the liveness oracle and for marking an agent offline the moment its connection drops (default: the account's own CONNZ, presence offline by its TTL)")
	fl.StringVar(&opts.EvictCreds, "evict-creds", "", "a system-account creds file that may only close connections (KICK), with which the daemon answers evictPrincipal(s) on its admin rail; needs --system-creds (default: evictions refused)")
	fl.StringVar(&opts.Pidfile, "pidfile", "", "write the daemon's pid here once it holds the lease; removed when it exits")
	fl.BoolVar(&opts.Wait, "wait", false, "wait for a held lease instead of refusing")
	fl.DurationVar(&opts.BrokerGone, "broker-gone", delivery.DefaultBrokerGone, "exit when the broker has been unreachable this long")
	fl.IntVar(&opts.Shards, "shards", 1, "shard count (only 1 is supported)")
	fl.StringVar(&opts.Spaces, "spaces", "", "serve every space a space manifest (version 1 or 2) names, one lane each")
	_ = fl.MarkHidden("broker-gone")
	cmd.AddCommand(NewCmdPending(f, nil))
	return cmd
}

// systemCreds reads --system-creds and --evict-creds, if given: first, so a bad file is
// refused before anything connects.
func systemCreds(opts *Options) (sys, evict []byte, err error) {
	if opts.EvictCreds != "" && opts.SystemCreds == "" {
		return nil, nil, cmdutil.FlagErrorf("--evict-creds needs --system-creds: an eviction is judged by a sweep of the space's connections, which only the system credential may list; add --system-creds FILE (cotal up writes delivery-watch.creds beside the space's other credentials)")
	}
	if opts.SystemCreds != "" {
		if sys, err = cmdutil.ReadCredsFile("--system-creds", opts.SystemCreds); err != nil {
			return nil, nil, err
		}
	}
	if opts.EvictCreds != "" {
		if evict, err = cmdutil.ReadCredsFile("--evict-creds", opts.EvictCreds); err != nil {
			return nil, nil, err
		}
	}
	return sys, evict, nil
}

func runDeliver(ctx context.Context, opts *Options) error {
	sys, evict, err := systemCreds(opts)
	if err != nil {
		return err
	}
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	// Started by a broker process (cotal up): end with it, even when it was killed.
	ctx, stopWatch, err := cmdutil.WithParent(ctx, opts.Getenv)
	if err != nil {
		return err
	}
	defer stopWatch()
	creds, err := credential(opts, t)
	if err != nil {
		return err
	}
	cfg := delivery.Config{Space: t.Space, Server: t.Server, TLSCA: t.TLSCA, SystemCreds: sys, EvictCreds: evict, WaitForLease: opts.Wait,
		BrokerGone: opts.BrokerGone, Version: opts.Version, Logger: slog.New(opts.DaemonLog()),
		Creds: func(string) ([]byte, error) { return creds, nil }}
	pid := &cmdutil.Pidfile{Path: opts.Pidfile}
	defer pid.Remove(opts.IO.ErrOut)
	var readyErr error
	err = delivery.Serve(ctx, cfg, func(spacehost.Ready) {
		readyErr = pid.Write()
		fmt.Fprintf(opts.IO.Out, "✓ delivery daemon up (space %s)\n", t.Space)
		if rerr := cmdutil.SignalReady(opts.Getenv, "delivery "+t.Space); rerr != nil {
			fmt.Fprintf(opts.IO.ErrOut, "! %v\n", rerr)
		}
	}, nil)
	switch {
	case errors.Is(err, delivery.ErrLeaseHeld):
		return cmdutil.Refuse("a second delivery daemon for space "+t.Space, err.Error(), leaseHeldNext(t))
	case err != nil:
		return err
	case readyErr != nil:
		return readyErr
	case errors.Is(context.Cause(ctx), cmdutil.ErrParentGone):
		return fmt.Errorf("delivery daemon of space %s stopped: %w", t.Space, cmdutil.ErrParentGone)
	}
	fmt.Fprintf(opts.IO.ErrOut, "delivery daemon of space %s stopped; lease released\n", t.Space)
	return nil
}

// credential is the daemon's credential: --creds, or one of profile delivery minted from
// the project's keys. An open mesh has no delivery daemon.
func credential(opts *Options, t cmdutil.Target) ([]byte, error) {
	if t.Creds != "" {
		return cmdutil.ReadCredsFile("--creds", t.Creds)
	}
	if !t.Auth() {
		return nil, noCredential("a delivery daemon", t)
	}
	if t.Mesh != nil && !slices.Contains(t.Mesh.Spaces, t.Space) {
		return nil, cmdutil.Refuse(fmt.Sprintf("a delivery daemon for space %q", t.Space), "the mesh of "+t.Project.Root+" does not serve it",
			"cotal up --space "+t.Space)
	}
	return opts.Mint(t, trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery, Principal: DaemonPrincipal})
}

// noCredential refuses what (a daemon or a host) when there is no credential to run it
// with: on the project's own open mesh, because an open mesh has none; on any other
// server, because no --creds was given and no project's keys apply to it (that server
// may well be authenticated).
func noCredential(what string, t cmdutil.Target) error {
	if t.OnProjectMesh() {
		return cmdutil.Refuse(what+" on an open mesh",
			"the open dev mesh has no credentials, so the daemons could not tell members apart; its channels are live",
			OpenMeshNext(t))
	}
	where := "here"
	if t.Project != nil {
		where = "in " + t.Project.Root
	}
	return cmdutil.RefuseUsage(what+" for "+redact.URL(t.Server),
		"no --creds was given and no project "+where+" records that mesh, so there are no keys to mint a delivery credential from; give --creds (a creds file, or with --spaces a folder of <space>.creds), or run it in the folder of the project whose mesh it is", "")
}

// OpenMeshNext is what to run when a delivery daemon is asked of an open mesh: when it is
// the project's own mesh, restart it authenticated (cotal up then starts the daemon
// itself); another mesh is not this project's to restart, so nothing.
func OpenMeshNext(t cmdutil.Target) string {
	if !t.OnProjectMesh() || t.Mesh.Mode != workspace.ModeOpen {
		return ""
	}
	return "cotal down && cotal up --detach"
}

// leaseHeldNext is what to run when another daemon holds the lease: on the project's own
// mesh, when it is the one `cotal up` supervises (its pidfile names a live process), stop
// that one first, since --wait would wait on a daemon the broker keeps restarting;
// otherwise wait for the holder to stop, on the same mesh (another mesh's lease is never
// this project's daemon's to give up).
func leaseHeldNext(t cmdutil.Target) string {
	if t.OnProjectMesh() {
		d, _ := workspace.DaemonNamed("delivery")
		if rec, err := workspace.ReadPidfile(d.PidFile(t.Project, t.Space)); err == nil {
			if alive, _ := rec.Alive(); alive {
				return "cotal down delivery --space " + t.Space + " && cotal deliver --space " + t.Space
			}
		}
	}
	return "cotal deliver --space " + t.Space + cmdutil.ElsewhereArgs(t) + " --wait"
}
