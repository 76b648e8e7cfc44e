// Package authservice implements `cotal auth-service`: the auth service of one user-auth
// space in the foreground (the auth callout and the loopback bearer exchange).
package authservice

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/oidc"
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
	IdP         string // issuer URL of the OIDC provider whose ID tokens the exchange accepts
	ClientID    string // audience the ID tokens must name
}

// NewCmdAuthService builds `cotal auth-service`.
func NewCmdAuthService(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Factory: f}
	cmd := &cobra.Command{
		Use:   "auth-service --idp URL [--client-id ID] --space S [--server URL] [--port N] [--auth-timeout D]",
		Short: "Run the auth service of a user-auth space in the foreground",
		Long: `Run the auth service of one user-auth space: the NATS auth callout, which admits a
connection made with the space's sentinel creds and a Cotal bearer as its token into the
space's data account with the permissions of the actor's ledger row, and the loopback
exchange on 127.0.0.1:<port>, which hands out those bearers.

--idp names the OIDC provider (its issuer URL: https://, or http:// on 127.0.0.1 or
localhost) whose ID tokens the exchange accepts from people; their aud must contain
--client-id. Its keys come from <issuer>/.well-known/openid-configuration.

It opens its ledger connection, subscribes the callout, binds the exchange, and only then
writes auth-service.json (url, capability, issuer, pid, space; 0600) into the space's
state folder .cotal/auth/space.<hex>/ and prints one ready line. It removes the file when
it stops (SIGTERM or Ctrl-C) and removes a stale one at start.`,
		Example: `  cotal auth-service --space team --idp https://accounts.google.com --client-id 1234.apps.googleusercontent.com
  cotal auth-service --space team --idp http://127.0.0.1:5556/dex --server nats://127.0.0.1:4222 --port 7420`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Mesh.Space != "" {
				if err := protocol.CheckSpace(opts.Mesh.Space); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if opts.IdP == "" {
				return cmdutil.FlagErrorf("--idp is required: the issuer URL of the OIDC provider")
			}
			if err := oidc.CheckIssuer(opts.IdP); err != nil {
				return cmdutil.FlagErrorf("--idp: %v", err)
			}
			if opts.ClientID == "" {
				return cmdutil.FlagErrorf("--client-id: want a non-empty client id")
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
	fl.StringVar(&opts.IdP, "idp", "", "issuer URL of the OIDC provider (required)")
	fl.StringVar(&opts.ClientID, "client-id", "cotal", "OIDC client id the ID tokens must name as audience")
	return cmd
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
	lane := &authsvc.Lane{Space: t.Space, Server: t.Server, Chain: chain, Dir: dir, IdP: &oidc.Verifier{Issuer: opts.IdP, ClientID: opts.ClientID}, IdPIssuer: opts.IdP,
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
