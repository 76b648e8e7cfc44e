// Package authservice implements `cotal auth-service`: the auth service of one user-auth
// space in the foreground (the auth callout and the loopback bearer exchange), or of many
// spaces from one process, one lane per space of a manifest.
package authservice

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/spacehost"
)

// anySpace stands in for --space while resolving the mesh of a host: each lane has its own.
const anySpace = "any"

// Options are the flags of `cotal auth-service`: authsvc's flag table (RegisterFlags) in
// Config, where --space, --server and --tls-ca default to the project's, and --pidfile.
type Options struct {
	IO        *iostreams.IOStreams
	Resolve   cmdutil.ResolveFunc
	Getenv    func(string) string
	DaemonLog func() slog.Handler // the daemon's log handler (COTAL_DEBUG)

	Config  authsvc.Config // TrustDir, Store and Logger are set by run
	Pidfile string         // written once ready, removed on exit
}

// NewCmdAuthService builds `cotal auth-service`.
func NewCmdAuthService(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Getenv: f.Getenv, DaemonLog: f.DaemonLog}
	cmd := &cobra.Command{
		Use:   "auth-service [--space S | --spaces MANIFEST [--callout-only]] [--server URL] [--port N] [--auth-timeout D] [--service-endpoints]",
		Short: "Run the auth service of user-auth spaces in the foreground",
		Long: `Run the auth service of one user-auth space: the NATS auth callout, which admits a
connection made with the space's sentinel creds and a Cotal bearer as its token into the
space's data account with the permissions of the actor's ledger row, and the loopback
exchange on 127.0.0.1:<port>, which hands out those bearers.

The space must be a user-auth space (cotal up --user-auth --idp URL): the exchange accepts
the ID tokens of the IdP pinned there (keys from <issuer>/.well-known/openid-configuration).
cotal up --user-auth runs this command in the background for each user-auth space; run it
yourself against a broker you host elsewhere, or after cotal down auth.

It claims the space's plane, subscribes the callout, binds the exchange, and only then
writes auth-service.json (url, capability, issuer, pid, space; 0600) into the space's
state folder .cotal/auth/space.<hex>/ and prints one ready line. It removes the file when
it stops (SIGTERM or Ctrl-C) and removes a stale one at start.

Exactly one auth service serves a space: it claims the space's plane (the key plane in
cotal_auth_<space>) before it answers anything. A second one refuses (live-peer while the
first runs; unknown when the delivery daemon cannot tell); one whose predecessor was killed
reclaims once the delivery daemon finds the old connections gone. If one of its broker
connections drops, it is fenced: it authorizes nothing more and exits 1; start it again.

--exchange-public-port N adds the public face on 127.0.0.1:N for your HTTPS reverse proxy:
GET /.well-known/cotal-mesh (the discovery bundle), GET /jwks, GET /health and POST
/exchange (an ID token is the proof; no capability), with refusals limited per peer.

--spaces MANIFEST serves many spaces from one process, one lane per space, each with its
own connections, keys, plane claim and exchange on an ephemeral port (recorded in its
auth-service.json). The manifest is JSON: {"version": 1, "spaces": ["a", "b"]}, or
version 2 with one object per space that may name a public face:
{"version": 2, "spaces": [{"space": "a", "exchangePublicPort": 7451,
"exchangeTrustedProxy": true}]} (keys exchangePublicPort, exchangePublicUrl,
exchangeTrustedProxy, advertisedServer, agentProvisioningUrl, under the flags' rules).
It serves what it can: a space that fails is named with the reason and retried every 5 s;
a lane that is fenced closes alone and reopens. The host follows edits of the manifest
(and SIGHUP): a space added opens, one removed closes, a changed one reopens; once every
space the manifest no longer names is closed it writes <manifest>.applied (the SHA-256 of
the manifest it applied). --callout-only runs the callouts alone, all or none.`,
		Example: `  cotal auth-service --space team
  cotal auth-service --space team --server nats://127.0.0.1:4222 --port 7420 --service-endpoints
  cotal auth-service --space team --exchange-public-port 7451 \
      --exchange-public-url https://auth.example.com/team --exchange-trusted-proxy \
      --advertised-server tls://nats.example.com:4222
  cotal auth-service --spaces spaces.json --server nats://127.0.0.1:4222
  cotal auth-service --spaces callouts.json --callout-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	table := flag.NewFlagSet("auth-service", flag.ContinueOnError)
	authsvc.RegisterFlags(table, &opts.Config)
	fl.AddGoFlagSet(table)
	for name, def := range map[string]string{"space": "the project's space", "server": "the project's running mesh",
		"tls-ca": "the one the mesh was started with"} {
		fl.Lookup(name).Usage += " (default: " + def + ")"
	}
	fl.StringVar(&opts.Pidfile, "pidfile", "", "write the service's pid here once it is ready; removed when it exits")
	return cmd
}

// check refuses bad flags before anything runs.
func (o *Options) check(cmd *cobra.Command) error {
	if err := authsvc.CheckFlags(&o.Config, cmd.Flags().Changed); err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	return nil
}

func run(ctx context.Context, opts *Options) error {
	cfg := opts.Config
	flags := cmdutil.MeshFlags{Space: cfg.Space, Server: cfg.Server, TLSCA: cfg.TLSCA}
	if cfg.Spaces != "" {
		flags.Space = anySpace
	}
	t, err := opts.Resolve(flags)
	if err != nil {
		return err
	}
	if t.Project == nil {
		return cmdutil.Refuse("cotal auth-service outside a project",
			"the auth service needs the project's trust chain (.cotal/auth): run it from the project's folder", "")
	}
	h := opts.DaemonLog()
	cfg.TrustDir, cfg.Server, cfg.TLSCA = t.Project.AuthDir(), t.Server, t.TLSCA
	if cfg.Spaces != "" {
		cfg.Logger = slog.New(spacehost.NewPrefixHandler(h))
		return runHost(ctx, opts, cfg)
	}
	cfg.Space = t.Space
	cfg.Logger = slog.New(h)
	if _, err := authsvc.ReadPin(cfg.TrustDir, t.Space); errors.Is(err, authsvc.ErrNotUserAuth) {
		return cmdutil.Refuse(fmt.Sprintf("an auth service for space %q", t.Space),
			"it is not a user-auth space: its peers hold static creds and nothing would ask the service (a user-auth space is made by cotal up --user-auth --idp URL --space NAME)", "")
	} else if err != nil {
		return err
	}
	// Started by a broker process (cotal up): end with it, even when it was killed.
	ctx, stopWatch, err := cmdutil.WithParent(ctx, opts.Getenv)
	if err != nil {
		return err
	}
	defer stopWatch()
	dir := authsvc.StateDir(cfg.TrustDir, t.Space)
	pid := &cmdutil.Pidfile{Path: opts.Pidfile}
	defer pid.Remove(opts.IO.ErrOut)
	var readyErr error
	err = authsvc.Serve(ctx, cfg, func(spacehost.Ready) {
		readyErr = pid.Write()
		where := filepath.Join(dir, authsvc.StatusFile)
		if st, err := authsvc.ReadStatus(dir); err == nil {
			if st.PublicURL != "" {
				where = "public face " + st.PublicURL + ", " + where
			}
			where = "exchange " + st.URL + " (" + where + ")"
		}
		fmt.Fprintf(opts.IO.Out, "✓ auth service of space %q ready: %s\n", t.Space, where)
		if rerr := cmdutil.SignalReady(opts.Getenv, "auth "+t.Space); rerr != nil {
			fmt.Fprintf(opts.IO.ErrOut, "! %v\n", rerr)
		}
	}, nil)
	if err == nil {
		err = readyErr
	}
	if err == nil && errors.Is(context.Cause(ctx), cmdutil.ErrParentGone) {
		err = fmt.Errorf("auth service of space %s stopped: %w", t.Space, cmdutil.ErrParentGone)
	}
	return err
}

// runHost runs a host of lanes until ctx ends; SIGHUP reloads its manifest.
func runHost(ctx context.Context, opts *Options, cfg authsvc.Config) error {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	what := "auth service host"
	if cfg.CalloutOnly {
		what = "callout host"
	}
	err := authsvc.Serve(hctx, cfg, cmdutil.HostReady(opts.IO, what), func(h *spacehost.Host) { cmdutil.ReloadOnHUP(hctx, h) })
	if err != nil {
		return cmdutil.HostError(what, cfg.Spaces, err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s stopped; plane claims released\n", what)
	return nil
}
