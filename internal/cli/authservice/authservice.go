// Package authservice implements `cotal auth-service`: the auth service of one user-auth
// space in the foreground (the auth callout and the loopback bearer exchange).
package authservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// Options are the flags of `cotal auth-service`.
type Options struct {
	IO      *iostreams.IOStreams
	Factory *cmdutil.Factory

	Mesh        cmdutil.MeshFlags // Space and Server only
	Port        int
	AuthTimeout time.Duration
}

// NewCmdAuthService builds `cotal auth-service`.
func NewCmdAuthService(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "auth-service --space S [--server URL] [--port N] [--auth-timeout D]",
		Short: "Run the auth service of a user-auth space in the foreground",
		Long: `Run the auth service of one user-auth space: the NATS auth callout, which admits a
connection made with the space's sentinel creds and a Cotal bearer as its token into the
space's data account with the permissions of the actor's ledger row, and the loopback
exchange on 127.0.0.1:<port>, which hands out those bearers.

It opens its ledger connection, subscribes the callout, binds the exchange, and only then
writes auth-service.json (url, capability, issuer, pid, space; 0600) into the space's
state folder .cotal/auth/space.<hex>/ and prints one ready line. It removes the file when
it stops (SIGTERM or Ctrl-C) and removes a stale one at start.`,
		Example: `  cotal auth-service --space team
  cotal auth-service --space team --server nats://127.0.0.1:4222 --port 7420`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Mesh.Space != "" {
				if err := protocol.CheckSpace(opts.Mesh.Space); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if opts.Port < 0 || opts.Port > 65535 {
				return cmdutil.FlagErrorf("--port %d: want 0 (ephemeral) to 65535", opts.Port)
			}
			if opts.AuthTimeout < 0 {
				return cmdutil.FlagErrorf("--auth-timeout %s: want a positive duration", opts.AuthTimeout)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Mesh.Space, "space", "", "space to serve (default: the project's space)")
	fl.StringVar(&opts.Mesh.Server, "server", "", "NATS URL of the mesh (default: the project's running mesh)")
	fl.IntVar(&opts.Port, "port", 0, "loopback port of the exchange (0: ephemeral)")
	fl.DurationVar(&opts.AuthTimeout, "auth-timeout", 2*time.Second, "bound on one authorization")
	return cmd
}

// noIdP refuses every ID token: no OIDC verifier is wired into the command yet, so only
// agent exchanges (an owner's still-valid bearer) and the callout are served.
type noIdP struct{}

func (noIdP) VerifyIDToken(context.Context, string) (string, string, error) {
	return "", "", errors.New("this auth service has no IdP configured: ID-token exchange is not available")
}

func run(ctx context.Context, opts *Options) error {
	t, err := opts.Factory.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if t.Project == nil {
		return cmdutil.Refuse("cotal auth-service outside a project",
			"the auth service needs the project's trust chain (.cotal/auth)", "cd into the project and run cotal auth-service --space "+t.Space)
	}
	chain, err := trust.Open(t.Project.AuthDir())
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if opts.Factory.Getenv != nil && opts.Factory.Getenv("COTAL_DEBUG") != "" {
		log = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	dir := authsvc.StateDir(chain.Dir(), t.Space)
	lane := &authsvc.Lane{Space: t.Space, Server: t.Server, Chain: chain, Dir: dir, IdP: noIdP{},
		Port: opts.Port, AuthTimeout: opts.AuthTimeout, Logger: log}
	return lane.Run(ctx, func() {
		st, err := authsvc.ReadStatus(dir)
		if err != nil {
			fmt.Fprintf(opts.IO.Out, "✓ auth service of space %q ready (%s)\n", t.Space, filepath.Join(dir, authsvc.StatusFile))
			return
		}
		fmt.Fprintf(opts.IO.Out, "✓ auth service of space %q ready: exchange %s (%s)\n", t.Space, st.URL, filepath.Join(dir, authsvc.StatusFile))
	})
}
