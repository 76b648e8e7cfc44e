// Package up implements `cotal up`: start the embedded broker and provision a space.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/oidc"
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

	manifest *workspace.Manifest // read from File
}

// NewCmdUp builds `cotal up`.
func NewCmdUp(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Getwd: f.Getwd, Executable: f.Executable, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "up [--open | --user-auth --idp URL] [--space S] [--server URL] [--store-dir D] [--detach] [-f cotal.yaml [--dry-run]]",
		Short: "Start the embedded broker and serve a space",
		Long: `Start an embedded NATS server with JetStream, provision the space's streams and buckets,
and serve until Ctrl-C. With --detach it runs in the background (pidfile .cotal/nats.pid,
log .cotal/nats.log) and returns once it is ready; stop it with ` + "`cotal down`" + `.

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
			if opts.UserAuth && opts.IdP == "" {
				return cmdutil.FlagErrorf("--user-auth needs --idp <URL>: the IdP people sign in with")
			}
			if !opts.UserAuth && (cmd.Flags().Changed("idp") || cmd.Flags().Changed("client-id")) {
				return cmdutil.FlagErrorf("--idp and --client-id go with --user-auth")
			}
			if opts.UserAuth && cmd.Flags().Changed("client-id") {
				if opts.ClientID == "" {
					return cmdutil.FlagErrorf("--client-id: want the OIDC client id people sign in with, or leave it out to pin the IdP the reference's way")
				}
				if err := oidc.CheckIssuer(opts.IdP); err != nil {
					return cmdutil.FlagErrorf("--idp: %v", err)
				}
			} else if opts.UserAuth {
				if _, err := oidc.NormalizeIdPURL(opts.IdP); err != nil {
					return cmdutil.FlagErrorf("--idp: %v", err)
				}
			}
			if opts.DryRun && opts.File == "" {
				return cmdutil.FlagErrorf("--dry-run needs -f <cotal.yaml>")
			}
			if _, _, err := listenAddr(opts.Server); err != nil {
				return cmdutil.FlagErrorf("--server: %v", err)
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
	fl.StringVar(&opts.Server, "server", "", "listen URL, e.g. nats://127.0.0.1:4222 (default: loopback, 4222 or a free port)")
	fl.StringVar(&opts.StoreDir, "store-dir", "", "JetStream store (default: .cotal/nats)")
	fl.BoolVar(&opts.Detach, "detach", false, "run in the background and return once ready")
	fl.StringVarP(&opts.File, "file", "f", "", "a team manifest (cotal.yaml) whose space, channels and agents up owns")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "with -f: print what would be created and change nothing")
	return cmd
}

// listenAddr reads --server into a host and a broker.Server port.
func listenAddr(server string) (string, int, error) {
	if server == "" {
		return "127.0.0.1", 0, nil
	}
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "nats" || u.Host == "" {
		return "", 0, fmt.Errorf("%q is not a nats://host:port URL", server)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, fmt.Errorf("%q needs a port, e.g. nats://127.0.0.1:4222", server)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not 0 to 65535", server, portText)
	}
	if port == 0 {
		port = -1 // any free port
	}
	return host, port, nil
}

func runUp(ctx context.Context, opts *Options) error {
	if opts.File != "" {
		if err := opts.readManifest(); err != nil {
			return err
		}
	}
	if err := opts.checkOpenHost(); err != nil {
		return err
	}
	if opts.DryRun {
		wd, proj, err := cmdutil.FindProject(opts.Getwd, opts.Getenv)
		if err != nil && wd == "" {
			return err
		}
		if proj == nil {
			proj = &workspace.Project{Root: wd} // shown, never created
		}
		return printPlan(opts, proj)
	}
	proj, err := project(opts)
	if err != nil {
		return err
	}
	space := opts.Space
	if space == "" {
		space = proj.DefaultSpace()
		if err := checkDefaultSpace(proj); err != nil {
			return err
		}
	}
	if opts.UserAuth {
		if err := enableUserAuth(opts, proj, space); err != nil {
			return err
		}
	}
	if cmdutil.MeshRunning(proj) {
		return addSpace(ctx, opts, proj, space)
	}
	if opts.Detach {
		return detach(ctx, opts, proj, space)
	}
	return serve(ctx, opts, proj, space)
}

// enableUserAuth pins the IdP of space and creates its auth service's keys, before any
// broker process starts, so the broker preloads the callout account and supervises the
// space's auth service.
func enableUserAuth(opts *Options, proj *workspace.Project, space string) error {
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	if _, err := chain.Space(space); err != nil {
		return err
	}
	pin, err := authsvc.Enable(chain, space, opts.IdP, opts.ClientID)
	if err != nil {
		return cmdutil.Refuse("--user-auth --idp "+opts.IdP, err.Error(),
			"keep the IdP the space was created with, or serve the people of the new IdP in a new space (--space)")
	}
	if pin.OIDC() {
		fmt.Fprintf(opts.IO.ErrOut, "user auth: space %s admits people of %s (client %s)\n", space, pin.Issuer, pin.ClientID)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "user auth: space %s admits people of %s (issuer %s, keys %s)\n", space, pin.URL, pin.Issuer, pin.JWKSURI)
	}
	return nil
}

// project is the project up serves: the nearest .cotal/ above the current folder, or a
// new one in the current folder.
func project(opts *Options) (*workspace.Project, error) {
	wd, proj, err := cmdutil.FindProject(opts.Getwd, opts.Getenv)
	if err == nil {
		return proj, nil
	}
	if wd == "" {
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

// checkOpenHost refuses an open mesh on a host beyond loopback: it has no authentication,
// so anyone who reaches the host could read and post in every space.
func (o *Options) checkOpenHost() error {
	if !o.Open {
		return nil
	}
	host, _, err := listenAddr(o.Server)
	if err != nil {
		return cmdutil.FlagErrorf("--server: %v", err)
	}
	if broker.IsLoopback(host) {
		return nil
	}
	return cmdutil.Refuse("an open mesh on "+host,
		"an open mesh has no authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost); "+
			"an authenticated mesh may listen on any address",
		"cotal up --detach --server "+o.Server)
}

// readyAddr is how a ready line names where the broker serves: the URL local clients
// dial, and the address bound when that differs from it (0.0.0.0:4222, every interface).
func readyAddr(url, listen string) string {
	if listen == "" || strings.TrimPrefix(url, "nats://") == listen {
		return url
	}
	return url + ", listening on " + listen
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

// addSpace provisions space on the mesh that already runs for proj, pushing its account
// to the broker first on an authenticated mesh. Nothing else changes, and no connected
// peer of another space notices.
func addSpace(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	mesh, err := proj.ReadMesh()
	if err != nil {
		return err
	}
	if mesh.Mode != opts.mode() {
		return cmdutil.Refuse("`"+strings.TrimSuffix(upCommand(opts.mode()), " --detach")+"` on a running "+modeName(mesh.Mode),
			"the mode of a running mesh does not change", "cotal down && "+upCommand(opts.mode()))
	}
	if opts.Server != "" && opts.Server != mesh.Server {
		return cmdutil.Refuse("--server "+opts.Server, "the mesh of this project already runs at "+mesh.Server,
			"cotal down && cotal up --server "+opts.Server)
	}
	// Nothing is written or pushed unless every record this run updates can be written.
	dirs := []string{proj.Dir()}
	if mesh.Mode == workspace.ModeAuth {
		dirs = append(dirs, proj.AuthDir())
	}
	if err := checkWritable("to add space "+space, dirs...); err != nil {
		return err
	}
	var chain *trust.Chain
	if mesh.Mode == workspace.ModeAuth {
		if chain, err = trust.Open(proj.AuthDir()); err != nil {
			return err
		}
		if err := pushAccount(ctx, chain, mesh.Server, space); err != nil {
			return err
		}
	}
	if err := provisionSpace(ctx, opts.IO.ErrOut, chain, proj, mesh.Server, space); err != nil {
		return err
	}
	if err := applyManifest(ctx, opts, chain, proj, mesh.Server); err != nil {
		return err
	}
	if !slices.Contains(mesh.Spaces, space) {
		mesh.Spaces = append(mesh.Spaces, space)
		if err := proj.WriteMesh(mesh); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "✓ space %q added to the running mesh at %s\n", space, mesh.Server)
	} else {
		fmt.Fprintf(opts.IO.Out, "✓ mesh already running at %s (space %s, %s)\n", mesh.Server, space, modeName(mesh.Mode))
	}
	if chain == nil {
		return nil
	}
	// Daemons `cotal down <component>` held down start again: the named space's, or every
	// space's when none is named.
	spaces := []string{space}
	if opts.Space == "" {
		spaces = mesh.Spaces
	}
	if err := proj.ReleaseHeld(spaces...); err != nil {
		return err
	}
	for _, s := range spaces {
		for _, k := range kinds(chain, proj, mesh.Server, opts.NoManager) {
			if err := waitDaemon(ctx, opts, k, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWritable refuses what when a folder in dirs cannot take a new file: it creates and
// removes a probe file in each, before anything is written.
func checkWritable(what string, dirs ...string) error {
	for _, d := range dirs {
		f, err := os.CreateTemp(d, ".write-check-*")
		if err != nil {
			return cmdutil.Refuse(what, fmt.Sprintf("%s is not writable (%v), so its records could not be kept; nothing was changed", d, err),
				"chmod u+w "+d)
		}
		name := f.Name()
		if err := errors.Join(f.Close(), os.Remove(name)); err != nil {
			return fmt.Errorf("%s: remove write check: %w", d, err)
		}
	}
	return nil
}

// pushAccount creates the space's account if needed and hands it to the running broker.
func pushAccount(ctx context.Context, chain *trust.Chain, server, space string) error {
	acct, err := chain.Space(space)
	if err != nil {
		return err
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := connect(server, sysCreds)
	if err != nil {
		return err
	}
	defer sys.Close()
	return trust.PushAccount(ctx, sys, acct.JWT())
}

// connect dials server with creds (nil: no credential).
func connect(server string, creds []byte) (*nats.Conn, error) {
	opts := []nats.Option{nats.Timeout(5 * time.Second)}
	if creds != nil {
		c, err := trust.ReadCreds(creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, c.Options()...)
	}
	nc, err := nats.Connect(server, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", server, err)
	}
	return nc, nil
}

// provisionSpace creates the space's streams and buckets, as its account's provisioner
// on an authenticated mesh (chain set) or anonymously on an open one, and on an
// authenticated mesh the bind-only durables of every persona of the project and, when it
// has none yet, its read ACL row (cmdutil.SeedReadACL). A persona file that does not parse is skipped with a warning on w.
func provisionSpace(ctx context.Context, w io.Writer, chain *trust.Chain, proj *workspace.Project, server, space string) error {
	var creds []byte
	class := provision.ClassLive // an open mesh has no delivery daemon
	if chain != nil {
		acct, err := chain.Space(space)
		if err != nil {
			return err
		}
		creds, err = acct.Mint(trust.UserSpec{Name: "cotal up", Profile: trust.ProfileProvisioner,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_up"}, ExpiresIn: time.Hour})
		if err != nil {
			return err
		}
		class = provision.ClassDurable
	}
	nc, err := connect(server, creds)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream on %s: %w", server, err)
	}
	rep, err := provision.Space(ctx, js, space, provision.Options{DefaultDeliveryClass: class})
	if err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "! %s\n", n)
	}
	if chain == nil {
		return nil
	}
	files, err := proj.PersonaFiles()
	if err != nil {
		return err
	}
	for _, pf := range files {
		if pf.Err != nil {
			fmt.Fprintf(w, "! persona %s skipped: %v\n", pf.Name, pf.Err)
			continue
		}
		per := pf.Persona
		uid, err := chain.Identity(space, per.Name)
		if err != nil {
			return err
		}
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: per.Name}
		if _, err := provision.Agent(ctx, js, space, p, uid, per.Role); err != nil {
			return err
		}
		if err := cmdutil.SeedReadACL(ctx, js, space, p, uid, per.ReadACL()); err != nil {
			return err
		}
	}
	return nil
}

// serve runs the broker in this process until ctx ends or the broker stops. On an
// authenticated mesh it serves every space the project's trust chain holds.
func serve(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	host, port, _ := listenAddr(opts.Server) // checked by the command
	store := opts.StoreDir
	if store == "" {
		store = proj.StoreDir()
	}
	srv := &broker.Server{Dir: store, Host: host, Port: port}
	spaces := []string{space}
	var chain *trust.Chain
	if !opts.Open {
		var err error
		if chain, err = trust.Open(proj.AuthDir()); err != nil {
			return err
		}
		if _, err := chain.Space(space); err != nil {
			return err
		}
		known, err := chain.Spaces()
		if err != nil {
			return err
		}
		for _, s := range known {
			if s != space {
				spaces = append(spaces, s)
			}
		}
		if srv.Accounts, err = chain.AccountJWTs(); err != nil {
			return err
		}
		srv.OperatorJWT, srv.SystemAccount = chain.OperatorJWT(), chain.SystemAccount()
		srv.ResolverDir = filepath.Join(proj.AuthDir(), "accounts")
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer srv.Close()
	for _, s := range spaces {
		if err := provisionSpace(ctx, opts.IO.ErrOut, chain, proj, srv.ClientURL(), s); err != nil {
			return err
		}
	}
	if err := applyManifest(ctx, opts, chain, proj, srv.ClientURL()); err != nil {
		return err
	}
	mesh := &workspace.Mesh{Server: srv.ClientURL(), Mode: opts.mode(), Spaces: spaces,
		StoreDir: store, Root: proj.Root, PID: os.Getpid(), Started: time.Now().UTC()}
	if err := workspace.WritePidfile(proj.PidFile(), os.Getpid()); err != nil {
		return err
	}
	defer workspace.RemovePidfile(proj.PidFile())
	if err := proj.WriteMesh(mesh); err != nil {
		return err
	}
	defer proj.RemoveMesh()
	if err := proj.ReleaseHeld(); err != nil { // left by a mesh that did not stop cleanly
		return err
	}

	what := modeName(opts.mode())
	if chain != nil {
		exe, err := selfExe(opts.Executable)
		if err != nil {
			return fmt.Errorf("find the cotal binary: %w", err)
		}
		log := slog.New(cmdutil.LogHandler(opts.IO.ErrOut, slog.LevelInfo))
		// The daemons' lifeline: this process alone holds the write end, so its end, even
		// by SIGKILL, is an end-of-file every daemon sees.
		lifeR, lifeW, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("daemon lifeline: %w", err)
		}
		defer lifeW.Close()
		defer lifeR.Close()
		dctx, stop := context.WithCancel(ctx)
		for _, kind := range kinds(chain, proj, srv.ClientURL(), opts.NoManager) {
			d := &daemons{kind: kind, exe: exe, proj: proj, running: map[string]bool{}, log: log, life: lifeR}
			// Deferred after srv.Close, so it runs first: daemons release what they hold
			// while the broker still serves.
			defer d.wait()
			if err := d.startAll(dctx, spaces); err != nil {
				stop()
				return err
			}
			go d.watch(dctx)
		}
		defer stop()
		what += ", delivery up"
		n := countUserAuth(chain, spaces)
		if n > 0 {
			what += ", auth service up for " + cmdutil.Count(n, "user-auth space")
		}
		if !opts.NoManager && n < len(spaces) {
			what += ", manager up"
		}
	}
	fmt.Fprintf(opts.IO.Out, "✓ cotal up: %s (space %s, %s, store %s)\n", readyAddr(srv.ClientURL(), srv.ListenAddr()), space, what, store)
	if err := cmdutil.SignalReady(opts.Getenv, srv.ClientURL()+" "+srv.ListenAddr()); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(opts.IO.ErrOut, "stopping the mesh")
		return nil
	case <-srv.Done():
		return fmt.Errorf("broker at %s stopped unexpectedly; see %s", srv.ClientURL(), proj.LogFile())
	}
}

// countUserAuth counts the user-auth spaces among spaces.
func countUserAuth(chain *trust.Chain, spaces []string) int {
	n := 0
	for _, s := range spaces {
		if _, err := authsvc.ReadPin(chain.Dir(), s); err == nil {
			n++
		}
	}
	return n
}
