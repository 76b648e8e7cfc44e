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
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
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

	manifest *workspace.Manifest // read from File
	served   bool                // the mesh served (its ready line was printed): a later failure keeps what it made
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
	return cmd
}

// checkCluster checks the cluster flags: all three or none.
func (o *Options) checkCluster() error {
	if o.ClusterName == "" && o.ClusterListen == "" && o.Routes == "" {
		return nil
	}
	const example = "e.g. --cluster-name team --cluster-listen 0.0.0.0:6222 --routes nats://a:6222,nats://b:6222,nats://c:6222"
	if o.ClusterName == "" {
		return cmdutil.FlagErrorf("--cluster-listen and --routes go with --cluster-name, the cluster's name (%s)", example)
	}
	if o.ClusterListen == "" || o.Routes == "" {
		return cmdutil.FlagErrorf("--cluster-name needs --cluster-listen HOST:PORT and --routes, the route URLs of every node (%s)", example)
	}
	if _, _, err := clusterAddr(o.ClusterListen); err != nil {
		return cmdutil.FlagErrorf("--cluster-listen: %v", err)
	}
	if _, err := broker.ParseRoutes(o.Routes); err != nil {
		return cmdutil.FlagErrorf("--routes: %v", err)
	}
	return nil
}

// checkExternal checks --external: a list of client URLs, and none of the flags that
// configure the embedded broker it replaces.
func (o *Options) checkExternal(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("external") {
		return nil
	}
	if o.Open {
		return cmdutil.FlagErrorf("--external and --open exclude each other: a server from cotal broker config trusts this project's operator")
	}
	for _, f := range []string{"server", "store-dir", "cluster-name", "cluster-listen", "routes", "tls-cert", "tls-key", "cluster-tls", "insecure-no-tls"} {
		if cmd.Flags().Changed(f) {
			return cmdutil.FlagErrorf("--%s configures the embedded broker, which --external does not start: set it in cotal broker config", f)
		}
	}
	urls, err := externalURLs(o.External)
	if err != nil {
		return cmdutil.FlagErrorf("--external: %v", err)
	}
	o.External = strings.Join(urls, ",")
	return nil
}

// externalURLs reads a comma-separated list of client URLs (nats://, tls:// or
// nats+tls://, each with a host and a port).
func externalURLs(list string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if err := cmdutil.CheckServerURLs(raw); err != nil {
			return nil, err
		}
		u, err := url.Parse(client.ServerURL(raw))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			return nil, fmt.Errorf("%q is not a nats://, tls:// or nats+tls://host:port URL", raw)
		}
		if _, p, err := net.SplitHostPort(u.Host); err != nil || p == "" {
			return nil, fmt.Errorf("%q needs a port, e.g. nats://10.0.0.2:4222", raw)
		}
		out = append(out, u.String())
	}
	if len(out) == 0 {
		return nil, errors.New("want the client URL of the server, e.g. nats://10.0.0.2:4222 (several: comma-separated)")
	}
	return out, nil
}

// clusterAddr reads --cluster-listen HOST:PORT into a host and a broker.Cluster port (0:
// any free port, which only a node that no other node lists may use).
func clusterAddr(listen string) (string, int, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not HOST:PORT, e.g. 0.0.0.0:6222", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not 0 to 65535", listen, portText)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// checkClusterChain refuses to start a node of an authenticated cluster whose project
// does not hold the shared trust chain with the space's account: a chain or an account
// made here would be this node's alone, and the other nodes would refuse its peers.
func checkClusterChain(opts *Options, proj *workspace.Project, space string) error {
	if opts.ClusterName == "" || opts.Open || cmdutil.MeshRunning(proj) {
		return nil
	}
	what := "to start a node of cluster " + opts.ClusterName + " for space " + space
	if _, err := os.Stat(filepath.Join(proj.AuthDir(), "broker.json")); errors.Is(err, os.ErrNotExist) {
		return cmdutil.Refuse(what,
			"this project has no trust chain; every node must share one: export it on the first node with cotal broker export --space "+space+
				" FILE, bring FILE here and import it with cotal broker import FILE", "")
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	known, err := chain.Spaces()
	if err != nil {
		return err
	}
	if !slices.Contains(known, space) {
		return cmdutil.Refuse(what,
			"the trust chain of this project holds no account for space "+space+"; an account made here would be this node's alone: export the chain with the space (cotal broker export --space "+space+" trust.tar) on the node that made it, and import it here", "")
	}
	return nil
}

// clusterArgs are the cluster flags, for the background child.
func (o *Options) clusterArgs() []string {
	if o.ClusterName == "" {
		return nil
	}
	return []string{"--cluster-name", o.ClusterName, "--cluster-listen", o.ClusterListen, "--routes", o.Routes}
}

// listenAddr reads --server into a host and a broker.Server port.
func listenAddr(server string) (string, int, error) {
	if server == "" {
		return "127.0.0.1", 0, nil
	}
	if strings.Contains(server, ",") {
		return "", 0, fmt.Errorf("%q is a list of URLs, and cotal up listens on one address: give one nats://host:port URL (a list is for clients, --external and --routes)", server)
	}
	u, err := cmdutil.CheckListenURL(server)
	if err != nil {
		return "", 0, err
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, fmt.Errorf("%q needs a port, e.g. nats://127.0.0.1:4222", server)
	}
	if net.ParseIP(host) == nil && strings.Trim(host, "0123456789.") == "" {
		return "", 0, fmt.Errorf("%q: %s is not an IP address", server, host)
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

// listen is the host and broker.Server port the embedded broker binds: --server's (or the
// manifest's broker.servers'), else the manifest's broker.host on the default port, else
// loopback on the default port.
func (o *Options) listen() (string, int, error) {
	host, port, err := listenAddr(o.Server)
	if err == nil && o.Server == "" && o.manifest != nil && o.manifest.Broker.Host != "" {
		host = o.manifest.Broker.Host
	}
	return host, port, err
}

func runUp(ctx context.Context, opts *Options) (err error) {
	// A hangup (the terminal closed) stops up as Ctrl-C and SIGTERM do, cleanly; registered
	// before anything is written, so no SIGHUP kills up half-way.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
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
	if cmdutil.MeshRunning(proj) {
		return addSpace(ctx, opts, proj, space)
	}
	opts.noteCrashed(proj)
	if opts.Detach {
		return detach(ctx, opts, proj, space)
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

// serveExternal serves the project's spaces on an external nats-server that trusts the
// project's operator (cotal broker config): it pushes every account of the chain to the
// server's resolver, provisions every space, records the mesh and supervises the daemons
// until ctx ends. It starts no broker.
func serveExternal(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	if _, err := chain.Space(space); err != nil {
		return err
	}
	spaces := []string{space}
	known, err := chain.Spaces()
	if err != nil {
		return err
	}
	for _, s := range known {
		if s != space {
			spaces = append(spaces, s)
		}
	}
	if _, err := opts.applyLimits(chain, space, spaces, opts.IO.ErrOut); err != nil {
		return err
	}
	if err := pushAccounts(ctx, chain, opts.External, opts.TLSCA); err != nil {
		return err
	}
	for _, s := range spaces {
		// An external cluster may still be electing the new streams' leaders.
		if err := provisionClustered(ctx, opts.IO.ErrOut, chain, proj, opts.External, opts.TLSCA, s, opts.Replicas); err != nil {
			return err
		}
	}
	if err := applyManifest(ctx, opts, chain, proj, opts.External); err != nil {
		return err
	}
	return supervise(ctx, opts, proj, chain, served{space: space, spaces: spaces, url: opts.External,
		note: ", external broker", ready: opts.External})
}

// pushAccounts hands every account of chain (but the system account, which the server's
// configuration names) to the resolver of the server at url, as the system account.
func pushAccounts(ctx context.Context, chain *trust.Chain, url, ca string) error {
	jwts, err := chain.AccountJWTs()
	if err != nil {
		return err
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := connect(url, sysCreds, ca)
	if errors.Is(err, nats.ErrAuthorization) {
		return cmdutil.Refuse("to serve the project's spaces on "+url,
			"the server refused the project's system account: it does not trust this project's operator; start it from the configuration `cotal broker config --out nats.conf` writes", "")
	}
	if err != nil {
		return err
	}
	defer sys.Close()
	keys := make([]string, 0, len(jwts))
	for k := range jwts {
		if k != chain.SystemAccount() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := trust.PushAccount(ctx, sys, jwts[k]); err != nil {
			return fmt.Errorf("account %s: %w", k, err)
		}
	}
	return nil
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
		return cmdutil.Refuse("--user-auth --idp "+opts.IdP, err.Error()+
			"; keep the IdP the space was created with, or serve the people of the new IdP in a new space (--space)", "")
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

// checkOpenHost refuses an open mesh on a host beyond loopback: it has no authentication,
// so anyone who reaches the host could read and post in every space.
func (o *Options) checkOpenHost() error {
	if !o.Open {
		return nil
	}
	host, _, err := o.listen()
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

// checkTLSHost refuses an authenticated mesh listening beyond loopback without TLS,
// unless --insecure-no-tls: its credentials' signatures and every message would cross
// the network in clear text.
func (o *Options) checkTLSHost() error {
	if o.Open || o.TLSCert != "" || o.InsecureNoTLS {
		return nil
	}
	host, _, err := o.listen()
	if err != nil {
		return cmdutil.FlagErrorf("--server: %v", err)
	}
	if broker.IsLoopback(host) {
		return nil
	}
	return cmdutil.Refuse("a mesh on "+host+" without TLS",
		"beyond loopback, messages and connections would cross the network in clear text; serve TLS (--tls-cert, --tls-key and --tls-ca) with a certificate for the names clients dial, "+
			"or pass --insecure-no-tls to accept that (nothing was started or written)",
		"")
}

// readyAddr is how a ready line names where the broker serves: the URL local clients
// dial, and the address bound when that differs from it (0.0.0.0:4222, every interface).
func readyAddr(url, listen string) string {
	if listen == "" || strings.TrimPrefix(strings.TrimPrefix(url, "nats://"), "tls://") == listen {
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
	if opts.TLSCA == "" {
		opts.TLSCA = mesh.TLSCA // the running mesh's CA, for up's own connections
	}
	if mesh.Mode != opts.mode() {
		return cmdutil.Refuse("`"+strings.TrimSuffix(upCommand(opts.mode()), " --detach")+"` on a running "+modeName(mesh.Mode),
			"the mode of a running mesh does not change", "cotal down && "+upCommand(opts.mode()))
	}
	if opts.ClusterName != "" {
		return cmdutil.Refuse("--cluster-name "+opts.ClusterName+" on a running mesh",
			"the broker of this project already runs at "+mesh.Server+" and does not join a cluster while it runs",
			"cotal down && cotal up --detach "+strings.Join(opts.clusterArgs(), " "))
	}
	if opts.External != "" && opts.External != mesh.Server {
		return cmdutil.Refuse("--external "+opts.External, "the mesh of this project already runs at "+mesh.Server,
			"cotal down && cotal up --detach --external "+opts.External)
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
		known, err := chain.Spaces()
		if err != nil {
			return err
		}
		changed, err := opts.applyLimits(chain, space, withSpace(space, known), opts.IO.ErrOut)
		if err != nil {
			return err
		}
		// The running broker takes the space's account, and every account whose limits
		// changed, at once: the limits hold from the next write on.
		for _, s := range withSpace(space, changed) {
			if err := pushAccount(ctx, chain, mesh.Server, opts.TLSCA, s); err != nil {
				return err
			}
		}
	}
	if err := provisionSpace(ctx, opts.IO.ErrOut, chain, proj, mesh.Server, opts.TLSCA, space, opts.Replicas); err != nil {
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
func pushAccount(ctx context.Context, chain *trust.Chain, server, ca, space string) error {
	acct, err := chain.Space(space)
	if err != nil {
		return err
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := connect(server, sysCreds, ca)
	if err != nil {
		return err
	}
	defer sys.Close()
	return trust.PushAccount(ctx, sys, acct.JWT())
}

// connect dials server with creds (nil: no credential), trusting the CA file ca for TLS
// ("": the system's roots).
func connect(server string, creds []byte, ca string) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Timeout(5 * time.Second)}, client.TLSOptions(ca)...)
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
// replicas is --replicas (0: the default for the server, see spaceReplicas).
func provisionSpace(ctx context.Context, w io.Writer, chain *trust.Chain, proj *workspace.Project, server, ca, space string, replicas int) error {
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
	nc, err := connect(server, creds, ca)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream on %s: %w", server, err)
	}
	popts, err := spaceReplicas(ctx, chain, nc, ca, replicas)
	if err != nil {
		return err
	}
	popts.DefaultDeliveryClass = class
	rep, err := provision.Space(ctx, js, space, popts)
	if err != nil {
		return replicasRefusal(err, server, space, popts.Replicas)
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
	host, port, _ := opts.listen() // checked by the command
	store := opts.StoreDir
	if store == "" {
		store = proj.StoreDir()
	}
	srv := &broker.Server{Dir: store, Host: host, Port: port,
		TLSCert: opts.TLSCert, TLSKey: opts.TLSKey, TLSCA: opts.TLSCA, ClusterTLS: opts.ClusterTLS}
	if opts.ClusterName != "" {
		chost, cport, _ := clusterAddr(opts.ClusterListen) // checked by the command
		routes, _ := broker.ParseRoutes(opts.Routes)
		srv.Cluster = &broker.Cluster{Name: opts.ClusterName, Host: chost, Port: cport, Routes: routes}
		srv.Logger = slog.New(cmdutil.LogHandler(opts.IO.ErrOut, slog.LevelWarn))
	}
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
		if _, err := opts.applyLimits(chain, space, spaces, opts.IO.ErrOut); err != nil {
			return err
		}
		if srv.Accounts, err = chain.AccountJWTs(); err != nil {
			return err
		}
		srv.OperatorJWT, srv.SystemAccount = chain.OperatorJWT(), chain.SystemAccount()
		srv.ResolverDir = filepath.Join(proj.AuthDir(), "accounts")
		if srv.Cluster != nil {
			srv.Cluster.Secret = chain.RouteSecret()
		}
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer srv.Close()
	clusterNote := ""
	if srv.Cluster != nil {
		err := srv.WaitJetStream(ctx, func(what string) {
			fmt.Fprintf(opts.IO.ErrOut, "%s: start cotal up on the other nodes (routes %s)\n", what, opts.Routes)
		})
		if err != nil {
			return err
		}
		clusterNote = fmt.Sprintf(", cluster %s node %s routes on %s", opts.ClusterName, srv.Name(), srv.ClusterAddr())
	}
	for _, s := range spaces {
		provision := func() error {
			return provisionSpace(ctx, opts.IO.ErrOut, chain, proj, srv.ClientURL(), opts.TLSCA, s, opts.Replicas)
		}
		if srv.Cluster != nil {
			provision = func() error {
				return provisionClustered(ctx, opts.IO.ErrOut, chain, proj, srv.ClientURL(), opts.TLSCA, s, opts.Replicas)
			}
		}
		if err := provision(); err != nil {
			return err
		}
	}
	if err := applyManifest(ctx, opts, chain, proj, srv.ClientURL()); err != nil {
		return err
	}
	ready := srv.ClientURL() + " " + srv.ListenAddr()
	if srv.Cluster != nil {
		ready += " " + srv.Name() + " " + srv.ClusterAddr()
	}
	return supervise(ctx, opts, proj, chain, served{space: space, spaces: spaces, url: srv.ClientURL(), listen: srv.ListenAddr(),
		store: store, note: clusterNote, ready: ready, standby: srv.Cluster != nil, done: srv.Done()})
}

// served is what a started mesh serves, for supervise.
type served struct {
	space   string          // the space named (or the default one)
	spaces  []string        // every space served, space first
	url     string          // the URL clients dial
	listen  string          // the address bound ("" for an external broker)
	store   string          // the JetStream store ("" for an external broker)
	note    string          // added to the ready line
	ready   string          // what cmdutil.SignalReady reports to a detaching parent
	standby bool            // daemons stand by for their lease (a cluster node)
	done    <-chan struct{} // closed when the broker stops (nil: never seen)
}

// supervise records the mesh, runs the daemons of an authenticated mesh, reports ready and
// serves until ctx ends or the broker stops.
func supervise(ctx context.Context, opts *Options, proj *workspace.Project, chain *trust.Chain, sv served) error {
	space, spaces, store := sv.space, sv.spaces, sv.store
	mesh := &workspace.Mesh{Server: sv.url, Mode: opts.mode(), Spaces: spaces,
		StoreDir: store, Root: proj.Root, PID: os.Getpid(), Started: time.Now().UTC(), TLSCA: opts.TLSCA}
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
		for _, kind := range kinds(chain, proj, sv.url, opts.NoManager) {
			d := &daemons{kind: kind, executable: opts.Executable, proj: proj, running: map[string]bool{}, log: log, life: lifeR,
				standby: sv.standby}
			// supervise returns before serve closes the broker: daemons release what they
			// hold while the broker still serves.
			defer d.wait()
			if err := d.startAll(dctx, spaces); err != nil {
				stop()
				return err
			}
			d.startWatch(dctx)
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
	storeNote := ""
	if store != "" {
		storeNote = ", store " + store
	}
	opts.served = true
	fmt.Fprintf(opts.IO.Out, "✓ cotal up: %s (space %s, %s%s%s)\n", readyAddr(sv.url, sv.listen), space, what, sv.note, storeNote)
	if err := cmdutil.SignalReady(opts.Getenv, sv.ready); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(opts.IO.ErrOut, "stopping the mesh")
		return nil
	case <-sv.done:
		return fmt.Errorf("broker at %s stopped unexpectedly; see %s", sv.url, proj.LogFile())
	}
}

// clusterProvisionWait bounds how long a cluster node retries provisioning a space while
// the cluster settles (stream leaders elected, peers joining).
const clusterProvisionWait = 60 * time.Second

// provisionClustered provisions space on a node of a cluster that just formed: every node
// provisions at once, and a JetStream request may go unanswered while a new stream elects
// its leader, so a failure that is not a refusal is retried until clusterProvisionWait.
func provisionClustered(ctx context.Context, w io.Writer, chain *trust.Chain, proj *workspace.Project, server, ca, space string, replicas int) error {
	deadline := time.Now().Add(clusterProvisionWait)
	wait := 200 * time.Millisecond
	for {
		err := provisionSpace(ctx, w, chain, proj, server, ca, space, replicas)
		// Too few peers is a refusal a node outgrows as the other nodes join; any other
		// refusal stands.
		var refusal *cmdutil.Refusal
		settling := errors.Is(err, provision.ErrNotEnoughPeers)
		if err == nil || (errors.As(err, &refusal) && !settling) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(w, "provision space %s: the cluster is settling, trying again: %v\n", space, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
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
