// Package up implements `cotal up`: start the embedded broker and provision a space.
package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	supervisecmd "github.com/cotal-ai/cotal/internal/cli/supervise"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Options are the flags of `cotal up`.
type Options struct {
	IO         *iostreams.IOStreams
	Getwd      func() (string, error)
	Executable func() (string, error)
	Getenv     func(string) string

	Open      bool
	NoManager bool   // start no agent manager
	UserAuth  bool   // the space admits people of IdP through the auth service
	IdP       string // with UserAuth: the IdP's base URL, or with ClientID the OIDC issuer URL
	ClientID  string // with UserAuth: the OIDC client id its ID tokens name; "" pins the reference's way
	Space     string
	Server    string
	StoreDir  string
	Detach    bool
	File      string // cotal.yaml to apply
	DryRun    bool
	// TLS: TLSCert and TLSKey make the broker serve TLS on its client port; TLSCA is the CA
	// (PEM) that signed it, which up's own clients and the mesh record's readers trust;
	// ClusterTLS asks the same on the cluster port. InsecureNoTLS allows a bind beyond
	// loopback without TLS.
	TLSCert, TLSKey, TLSCA string
	ClusterTLS             bool
	InsecureNoTLS          bool
	Replicas               int // of every stream and bucket a space gets; 0 means 3 on a JetStream cluster of 3 or more servers, else 1

	// External, when set, is the client URL list of a nats-server this up starts no broker
	// for (one configured by cotal broker config): up pushes the spaces' accounts there,
	// provisions them and supervises the daemons.
	External string

	ClusterName   string // with ClusterListen and Routes: the embedded broker is a node of this cluster
	ClusterListen string // host:port the node's routes listen on
	Routes        string // comma-separated route URLs of the cluster's nodes

	// Limits are the --max-* flags given: what the named space may store and each
	// connection to it may do; a limit no flag sets is 0 (see applyLimits).
	Limits trust.Limits

	manifest    *workspace.Manifest // read from File
	restoreFlag string              // --restore
	restore     *restoreState       // the checked archive of --restore (restore.go)
	served      bool                // the mesh served (its ready line was printed): a later failure keeps what it made
}

// NewCmdUp builds `cotal up`.
func NewCmdUp(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Executable: f.Executable, Getenv: f.Getenv}
	limitTexts := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "up [--open | --user-auth --idp URL] [--space S] [--server URL] [--store-dir D] [--detach] [-f cotal.yaml [--dry-run]]",
		Short: "Start the embedded broker and serve a space",
		Long: `Start an embedded NATS server with JetStream, provision the space's streams and buckets,
and serve until Ctrl-C (or SIGTERM, or a hangup). With --detach it runs in the background
(pidfile .cotal/nats.pid, log .cotal/nats.log) and returns once it is ready; stop it with
` + "`cotal down`" + `. Everything is checked before anything is written (a -f manifest and its
personas too), and a run that fails or is stopped before its mesh serves takes away what it
made: keys, store, the .cotal/ folder itself when it made it. up runs in a project folder
(the nearest .cotal/ above, or a new one here), never in the home folder, whose .cotal/ is
the machine's own. After a crash the new delivery daemon may wait (up to 30 s) for the lease
the old one held; up says so before it waits.

The broker listens on loopback, port 4222, or a free port when 4222 is taken. An explicit
--server port that is taken is an error; port 0 means any free port. The ready line names
the URL local clients dial and, when it differs, the address bound (0.0.0.0:4222).
A space name is at most 64 characters: letters, digits, _ and -. Running up again on a
running mesh provisions the named space on it and starts again the daemons that
cotal down delivery or cotal down auth held down (the named space's, or every space's
without --space); nothing else changes.

The mesh is authenticated: the broker trusts an operator whose keys live in .cotal/auth/
(created on first use, never re-keyed), each space is a NATS account, and every peer
holds a credential signed by the space's key (see cotal mint). --open serves the
unauthenticated dev mesh instead, for loopback experiments: it refuses any --server host
beyond loopback (127.0.0.1, ::1, localhost). The mode of a running mesh
does not change: cotal down first.

--user-auth --idp URL makes the space a user-auth space: people sign in with the IdP at
URL (cotal login), are granted actors with cotal actor grant, and connect with the space's
deny-all sentinel creds plus a short-lived bearer from the space's auth service, which up
runs in the background (log .cotal/auth-service.<hex>.log; cotal down auth stops it).
Static creds (cotal mint) are refused on such a space. The IdP is pinned on first use:
owners are derived from it, so a space is never re-pointed to another.

Every space is bounded by the limits in its account: --max-storage (default 1GiB),
--max-memory, --max-streams, --max-consumers, --max-connections, and per connection
--max-subscriptions and --max-payload (or limits: in cotal.yaml). A limit no flag names keeps
its value. On a running mesh, cotal up --space S --max-storage 4GiB re-signs the account and
pushes it to the broker at once. A full space refuses new writes and keeps what it stored.

Without --client-id the IdP is pinned as the TypeScript reference pins it, so a
reference IdP (Better Auth with its JWT and device plugins) works unchanged: URL is its
auth base URL (e.g. https://idp.example.com/api/auth), its ID tokens are EdDSA JWTs whose
issuer and audience are URL's origin, checked with the keys of URL/jwks. With --client-id
the IdP is a standard OIDC provider (Google, Okta, Keycloak, Auth0): URL is its issuer,
its keys come from OIDC discovery and its ID tokens must name the client id.`,
		Example: `  cotal up --detach
  cotal up --space review          # add a space to the running mesh
  cotal up --open --detach         # unauthenticated dev mesh
  cotal up --detach --user-auth --idp https://idp.example.com/api/auth
  cotal up --detach --user-auth --idp https://idp.example.com/realms/team --client-id cotal
  cotal up --space review --max-storage 4GiB   # raise a space's storage limit, live
  cotal up                         # foreground; Ctrl-C stops it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Space != "" || cmd.Flags().Changed("space") {
				if err := protocol.CheckSpace(opts.Space); err != nil {
					return cmdutil.FlagErrorf("--space: %v", err)
				}
			}
			if opts.UserAuth && opts.Open {
				return cmdutil.FlagErrorf("--user-auth and --open exclude each other: an open mesh has no credentials to check")
			}
			if err := cmdutil.CheckIdPFlags(cmd, opts.UserAuth, opts.IdP, opts.ClientID); err != nil {
				return err
			}
			if opts.DryRun && opts.File == "" {
				return cmdutil.FlagErrorf("--dry-run needs -f <cotal.yaml>")
			}
			if _, _, err := listenAddr(opts.Server); err != nil {
				return cmdutil.FlagErrorf("--server: %v", err)
			}
			if err := opts.checkCluster(); err != nil {
				return err
			}
			if err := opts.checkExternal(cmd); err != nil {
				return err
			}
			if err := cmdutil.CheckTLSPair(opts.TLSCert, opts.TLSKey); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			for _, f := range []struct{ flag, path string }{{"--tls-cert", opts.TLSCert}, {"--tls-key", opts.TLSKey}} {
				if f.path == "" {
					continue
				}
				if err := (cmdutil.UserFile{Flag: f.flag, Path: f.path, Kind: "a PEM file", Max: cmdutil.MaxCAFileSize}).Check(); err != nil {
					return err
				}
			}
			if opts.TLSCA != "" {
				abs, err := cmdutil.CAFile(opts.TLSCA)
				if err != nil {
					return err
				}
				opts.TLSCA = abs
			}
			for _, f := range []*string{&opts.TLSCert, &opts.TLSKey} {
				if *f != "" {
					abs, err := filepath.Abs(*f)
					if err != nil {
						return cmdutil.FlagErrorf("--tls-cert/--tls-key %s: %v", *f, err)
					}
					*f = abs
				}
			}
			if opts.ClusterTLS && (opts.TLSCert == "" || opts.TLSCA == "") {
				return cmdutil.FlagErrorf("--cluster-tls needs --tls-cert, --tls-key and --tls-ca: routes check each other's certificate against the CA")
			}
			if opts.InsecureNoTLS && opts.TLSCert != "" {
				return cmdutil.FlagErrorf("--insecure-no-tls and --tls-cert exclude each other")
			}
			if err := opts.readLimitFlags(cmd.Flags(), limitTexts); err != nil {
				return err
			}
			if fi, err := os.Stat(opts.StoreDir); opts.StoreDir != "" && err == nil && !fi.IsDir() {
				return cmdutil.FlagErrorf("--store-dir %s: not a folder; name a folder (made when missing) for the JetStream store", opts.StoreDir)
			}
			if cmd.Flags().Changed("replicas") && opts.Replicas != 1 && opts.Replicas != 3 {
				return cmdutil.FlagErrorf("--replicas %d: want 1 (one copy of each stream) or 3 (a JetStream cluster of 3 or more servers)", opts.Replicas)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runUp(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.Open, "open", false, "serve the unauthenticated dev mesh (loopback only)")
	fl.BoolVar(&opts.NoManager, "no-manager", false, "start no agent manager (cotal supervise) for the spaces")
	fl.BoolVar(&opts.UserAuth, "user-auth", false, "people sign in with an OIDC provider (needs --idp)")
	fl.StringVar(&opts.IdP, "idp", "", "with --user-auth: the IdP's auth base URL (with --client-id: the OIDC issuer URL)")
	fl.StringVar(&opts.ClientID, "client-id", "", "with --user-auth: an OIDC provider's client id (discovery); without it the IdP is pinned the reference's way")
	fl.StringVar(&opts.Space, "space", "", "space to serve (default: the project folder's name)")
	fl.StringVar(&opts.Server, "server", "", "listen URL nats://HOST:PORT, no user, password or path (default: loopback, 4222 or a free port)")
	fl.StringVar(&opts.StoreDir, "store-dir", "", "JetStream store (default: .cotal/nats)")
	fl.BoolVar(&opts.Detach, "detach", false, "run in the background and return once ready")
	fl.StringVarP(&opts.File, "file", "f", "", "a team manifest (cotal.yaml) whose space, channels and agents up owns")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "with -f: print what would be created and change nothing")
	fl.StringVar(&opts.External, "external", "", "start no broker: serve the spaces on this nats-server (cotal broker config), nats://a:4222[,nats://b:4222,...]")
	fl.StringVar(&opts.ClusterName, "cluster-name", "", "make the embedded broker a node of this NATS cluster (the same name on every node)")
	fl.StringVar(&opts.ClusterListen, "cluster-listen", "", "with --cluster-name: HOST:PORT this node's routes listen on, e.g. 0.0.0.0:6222")
	fl.StringVar(&opts.Routes, "routes", "", "with --cluster-name: the route URLs of the cluster's nodes, nats://a:6222,nats://b:6222,nats://c:6222 (the same list on every node)")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "serve TLS on the client port with this certificate (PEM; needs --tls-key)")
	fl.StringVar(&opts.TLSKey, "tls-key", "", "the private key (PEM) of --tls-cert")
	fl.StringVar(&opts.TLSCA, "tls-ca", "", "the CA (PEM) that signed --tls-cert, which local clients and daemons trust")
	fl.BoolVar(&opts.ClusterTLS, "cluster-tls", false, "serve TLS on the cluster (route) port too, with --tls-cert, checked against --tls-ca")
	fl.BoolVar(&opts.InsecureNoTLS, "insecure-no-tls", false, "allow listening beyond loopback without TLS (credentials and messages cross the network in clear text)")
	fl.IntVar(&opts.Replicas, "replicas", 0, "replicas of every stream and bucket of the space: 1 or 3 (default: 3 on a JetStream cluster of 3 or more servers, else 1)")
	addLimitFlags(fl, limitTexts)
	addRestoreFlag(fl, opts)
	return cmd
}

func runUp(ctx context.Context, opts *Options) (err error) {
	// A hangup (the terminal closed) stops up as Ctrl-C and SIGTERM do, cleanly; registered
	// before anything is written, so no SIGHUP kills up half-way.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	if err := supervisecmd.Unsupported(runtime.GOOS); err != nil && !opts.NoManager {
		fmt.Fprintf(opts.IO.ErrOut, "! %s runs without the agent manager: %v\n", runtime.GOOS, err)
		opts.NoManager = true
	}
	if opts.File != "" {
		if err := opts.readManifest(); err != nil {
			return err
		}
	}
	if err := opts.checkOpenHost(); err != nil {
		return err
	}
	if err := opts.checkTLSHost(); err != nil {
		return err
	}
	if err := opts.openRestore(); err != nil {
		return err
	}
	if opts.manifest != nil {
		// Every persona the manifest names is read now, before any key is made.
		if _, err := opts.access(); err != nil {
			return err
		}
	}
	if opts.DryRun {
		wd, err := opts.Getwd()
		if err != nil {
			return fmt.Errorf("current folder: %w", err)
		}
		proj, _ := workspace.FindProject(wd, opts.Getenv)
		if proj == nil {
			proj = &workspace.Project{Root: wd} // shown, never created
		}
		return printPlan(opts, proj)
	}
	wd, err := opts.Getwd()
	if err != nil {
		return fmt.Errorf("current folder: %w", err)
	}
	before := snapshot(filepath.Join(wd, workspace.ControlDir), opts.StoreDir)
	proj, err := project(opts)
	if err != nil {
		return err
	}
	if proj.Root != wd { // a project found above the current folder
		before = snapshot(proj.Dir(), opts.StoreDir)
	}
	// A run that fails, or is stopped, before its mesh serves leaves nothing it made (a
	// run on a running mesh makes no project state of its own to take away).
	running := cmdutil.MeshRunning(proj)
	defer func() {
		if err == nil || opts.served || running || (opts.Detach && cmdutil.MeshRunning(proj)) {
			return
		}
		if ctx.Err() != nil {
			err = errors.New("stopped by a signal before the mesh served; what this run made was taken away")
		}
		if uerr := before.undo(opts.Detach); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	space := opts.Space
	if space == "" {
		space = proj.DefaultSpace()
		if err := checkDefaultSpace(proj); err != nil {
			return err
		}
	}
	if err := checkClusterChain(opts, proj, space); err != nil {
		return err
	}
	if opts.UserAuth {
		if err := enableUserAuth(opts, proj, space); err != nil {
			return err
		}
	}
	if err := opts.prepareRestore(proj); err != nil {
		return err
	}
	if cmdutil.MeshRunning(proj) {
		return addSpace(ctx, opts, proj, space)
	}
	opts.noteCrashed(proj)
	if opts.Detach {
		if err := detach(ctx, opts, proj, space); err != nil {
			return err
		}
		opts.noteRestored()
		return nil
	}
	if opts.External != "" {
		return serveExternal(ctx, opts, proj, space)
	}
	return serve(ctx, opts, proj, space)
}

// noteCrashed says, before a start that may wait for it, that the last mesh of proj ended
// without stopping (its pidfile is left, its process gone): the delivery daemon it ran
// held the space's delivery lease, which the new one waits for until it expires.
func (o *Options) noteCrashed(proj *workspace.Project) {
	rec, err := workspace.ReadPidfile(proj.PidFile())
	if err != nil || o.Open {
		return
	}
	if alive, err := rec.Alive(); err != nil || alive {
		return
	}
	fmt.Fprintf(o.IO.ErrOut, "the last mesh of this project (pid %d) ended without stopping: "+
		"its delivery lease may still be held, and the new delivery daemon waits for it to expire (at most %s)\n",
		rec.PID, provision.LeaseTTL)
}

// project is the project up serves: the nearest .cotal/ above the current folder, or a
// new one in the current folder.
func project(opts *Options) (*workspace.Project, error) {
	wd, err := opts.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	if proj, err := workspace.FindProject(wd, opts.Getenv); err == nil {
		return proj, nil
	}
	if err := cmdutil.CheckProjectFolder(wd, opts.Getenv, "cotal up", "cotal up --detach"); err != nil {
		return nil, err
	}
	if opts.Space == "" && opts.File == "" {
		if err := checkDefaultSpace(&workspace.Project{Root: wd}); err != nil {
			return nil, err // before .cotal/ is created
		}
	}
	return workspace.Open(wd)
}

// checkDefaultSpace refuses a project folder whose name makes no valid space (too long).
func checkDefaultSpace(proj *workspace.Project) error {
	if err := protocol.CheckSpace(proj.DefaultSpace()); err != nil {
		return cmdutil.FlagErrorf("the space named after the project folder: %v; name one with --space", err)
	}
	return nil
}

// mode is the mesh mode these options ask for.
func (o *Options) mode() string {
	if o.Open {
		return workspace.ModeOpen
	}
	return workspace.ModeAuth
}

// modeName is how the ready line names a mode.
func modeName(mode string) string {
	if mode == workspace.ModeOpen {
		return "open mesh"
	}
	return "authenticated mesh"
}

// upCommand is the command that starts a mesh of mode.
func upCommand(mode string) string {
	if mode == workspace.ModeOpen {
		return "cotal up --open --detach"
	}
	return "cotal up --detach"
}
