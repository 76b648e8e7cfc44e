package brokercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// ConfigOptions are the flags of `cotal broker config`.
type ConfigOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string

	Out        string   // configuration file; "" or "-" is stdout
	Force      bool     // replace Out when it exists
	Spaces     []string // spaces whose accounts are made (when missing) and preloaded
	ServerName string   // server_name; required in a cluster (one per node)
	Listen     string   // client HOST:PORT (port 0: any free port)
	StoreDir   string   // JetStream store_dir; the resolver keeps account JWTs in <StoreDir>/accounts

	ClusterName   string // with ClusterListen and Routes: the cluster block
	ClusterListen string
	Routes        string

	TLSCert, TLSKey, TLSCA string
	ClusterTLS             bool
	InsecureNoTLS          bool
}

// NewCmdConfig builds `cotal broker config`.
func NewCmdConfig(f *cmdutil.Factory, runF func(context.Context, *ConfigOptions) error) *cobra.Command {
	opts := &ConfigOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "config [--out FILE [--force]] [--space S]... [--listen HOST:PORT] [--store-dir D] [--cluster-name C --cluster-listen HOST:PORT --routes URL,... --server-name N] [--tls-cert F --tls-key F [--tls-ca F] [--cluster-tls]]",
		Short: "Write a nats-server configuration that trusts this project's operator",
		Long: `Write the configuration of a stock nats-server (nats-server -c FILE) that serves this project's
spaces, for cotal up --external: it trusts the project's operator, names its system account,
keeps account JWTs in a full resolver (store-dir/accounts, so cotal up --external can add a
space at run time) preloaded with the accounts of the project's spaces, and runs JetStream.
The project is the nearest .cotal/ above the current folder (outside any project config is
refused: mkdir -m 700 .cotal makes the current folder one); --space S makes the account of
space S first when the chain has none.

It holds the operator's and the accounts' JWTs, which are public, and never a seed; with
--cluster-name it also holds the password the cluster's routes authenticate with (the one
embedded cotal nodes of this chain use, so both kinds can form one cluster): the file is
written 0600 either way. Without --out it goes to stdout. A file that exists is refused
unless --force.

--listen is the client address (default 127.0.0.1:4222; port 0 means any free port). Beyond
loopback, --tls-cert and --tls-key are needed (or --insecure-no-tls). --cluster-name,
--cluster-listen, --routes and --server-name (unique per node) add the cluster block;
--cluster-tls serves TLS on the routes too, checked against --tls-ca both ways.
Paths (--store-dir, the TLS files) are written absolute, as seen from here: edit them when
the server runs on another machine.`,
		Example: `  cotal broker config --space team --out nats.conf
  nats-server -c nats.conf &
  cotal up --external nats://127.0.0.1:4222 --space team --detach

  cotal broker config --space team --out a.conf --server-name a --listen 0.0.0.0:4222 \
    --cluster-name team --cluster-listen 0.0.0.0:6222 --routes nats://a:6222,nats://b:6222,nats://c:6222 \
    --tls-cert a.pem --tls-key a-key.pem --tls-ca ca.pem --cluster-tls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runConfig(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Out, "out", "", "write the configuration to this file (default: stdout)")
	fl.BoolVar(&opts.Force, "force", false, "replace --out when it exists")
	fl.StringArrayVar(&opts.Spaces, "space", nil, "make the account of this space first when the chain has none (repeatable)")
	fl.StringVar(&opts.ServerName, "server-name", "", "the server's name (default cotal; required with --cluster-name, unique per node)")
	fl.StringVar(&opts.Listen, "listen", "127.0.0.1:4222", "client HOST:PORT (port 0: any free port)")
	fl.StringVar(&opts.StoreDir, "store-dir", "", "JetStream store of the server (default: .cotal/external in the project)")
	fl.StringVar(&opts.ClusterName, "cluster-name", "", "add a cluster block with this name (the same on every node)")
	fl.StringVar(&opts.ClusterListen, "cluster-listen", "", "with --cluster-name: HOST:PORT the routes listen on, e.g. 0.0.0.0:6222")
	fl.StringVar(&opts.Routes, "routes", "", "with --cluster-name: the route URLs of the cluster's nodes, nats://a:6222,nats://b:6222,nats://c:6222")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "serve TLS on the client port with this certificate (PEM; needs --tls-key)")
	fl.StringVar(&opts.TLSKey, "tls-key", "", "the private key (PEM) of --tls-cert")
	fl.StringVar(&opts.TLSCA, "tls-ca", "", "the CA (PEM) that signed the certificates")
	fl.BoolVar(&opts.ClusterTLS, "cluster-tls", false, "serve TLS on the routes too, peers checked against --tls-ca")
	fl.BoolVar(&opts.InsecureNoTLS, "insecure-no-tls", false, "allow a client listen address beyond loopback without TLS")
	return cmd
}

// check reads the flags; every mistake is a usage error and nothing is written.
func (o *ConfigOptions) check() error {
	for _, sp := range o.Spaces {
		if err := protocol.CheckSpace(sp); err != nil {
			return cmdutil.FlagErrorf("--space: %v", err)
		}
	}
	if o.Force && (o.Out == "" || o.Out == "-") {
		return cmdutil.FlagErrorf("--force replaces the --out file: it does not go with stdout")
	}
	host, _, err := hostPort(o.Listen)
	if err != nil {
		return cmdutil.FlagErrorf("--listen: %v", err)
	}
	if err := cmdutil.CheckTLSPair(o.TLSCert, o.TLSKey); err != nil {
		return cmdutil.FlagErrorf("%v", err)
	}
	if o.InsecureNoTLS && o.TLSCert != "" {
		return cmdutil.FlagErrorf("--insecure-no-tls and --tls-cert exclude each other")
	}
	if !broker.IsLoopback(host) && o.TLSCert == "" && !o.InsecureNoTLS {
		return cmdutil.RefuseUsage("a client listen address of "+host+" without TLS",
			"beyond loopback, messages and connections would cross the network in clear text: give --tls-cert, --tls-key and --tls-ca, or --insecure-no-tls", "")
	}
	if o.ServerName != "" && strings.ContainsAny(o.ServerName, " \t\r\n.*>\"") {
		return cmdutil.FlagErrorf("--server-name %q: want letters, digits, _ and -", o.ServerName)
	}
	// The configuration names the TLS files; a stock nats-server reads them only when it
	// starts, so a missing or unreadable one is refused here, where the mistake is made.
	for _, f := range []struct{ flag, path string }{{"--tls-cert", o.TLSCert}, {"--tls-key", o.TLSKey}, {"--tls-ca", o.TLSCA}} {
		if f.path == "" {
			continue
		}
		if err := (cmdutil.UserFile{Flag: f.flag, Path: f.path, Kind: "a PEM file", Max: cmdutil.MaxCAFileSize}).Check(); err != nil {
			return err
		}
	}
	for _, f := range []*string{&o.TLSCert, &o.TLSKey, &o.TLSCA, &o.StoreDir} {
		if *f != "" {
			abs, err := filepath.Abs(*f)
			if err != nil {
				return cmdutil.FlagErrorf("%s: %v", *f, err)
			}
			*f = abs
		}
	}
	if o.ClusterName == "" && o.ClusterListen == "" && o.Routes == "" {
		if o.ClusterTLS {
			return cmdutil.FlagErrorf("--cluster-tls goes with --cluster-name")
		}
		return nil
	}
	const example = "e.g. --cluster-name team --cluster-listen 0.0.0.0:6222 --routes nats://a:6222,nats://b:6222,nats://c:6222 --server-name a"
	if o.ClusterName == "" || o.ClusterListen == "" || o.Routes == "" {
		return cmdutil.FlagErrorf("a cluster block needs --cluster-name, --cluster-listen HOST:PORT and --routes (%s)", example)
	}
	if strings.ContainsAny(o.ClusterName, " \t\r\n.*>\"") {
		return cmdutil.FlagErrorf("--cluster-name %q: want letters, digits, _ and -", o.ClusterName)
	}
	if o.ServerName == "" {
		return cmdutil.FlagErrorf("--cluster-name needs --server-name, a name unique to this node: JetStream knows its peers by name (%s)", example)
	}
	if _, _, err := hostPort(o.ClusterListen); err != nil {
		return cmdutil.FlagErrorf("--cluster-listen: %v", err)
	}
	if _, err := broker.ParseRoutes(o.Routes); err != nil {
		return cmdutil.FlagErrorf("--routes: %v", err)
	}
	if o.ClusterTLS && (o.TLSCert == "" || o.TLSCA == "") {
		return cmdutil.FlagErrorf("--cluster-tls needs --tls-cert, --tls-key and --tls-ca: routes check each other's certificate against the CA")
	}
	return nil
}

// hostPort reads HOST:PORT; port 0 is any free port (-1 in the configuration).
func hostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("%q is not HOST:PORT, e.g. 127.0.0.1:4222", hp)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not 0 to 65535", hp, p)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

func runConfig(opts *ConfigOptions) error {
	toFile := opts.Out != "" && opts.Out != "-"
	if toFile {
		if err := checkOutDir("--out", opts.Out); err != nil {
			return err
		}
		if _, err := os.Lstat(opts.Out); err == nil && !opts.Force {
			return cmdutil.Refuse("to write "+opts.Out, "the file exists and may be another server's configuration",
				"cotal broker config --out "+opts.Out+" --force")
		}
	}
	proj, err := findProject(opts.Getwd, opts.Getenv, "cotal broker config")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(proj.AuthDir(), "broker.json")); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(opts.IO.ErrOut, "created a new trust chain in %s\n", proj.AuthDir())
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	for _, sp := range opts.Spaces {
		if _, err := chain.Space(sp); err != nil {
			return err
		}
	}
	if opts.StoreDir == "" {
		opts.StoreDir = filepath.Join(proj.Dir(), "external")
	}
	conf, err := serverConfig(opts, chain, proj.Root)
	if err != nil {
		return err
	}
	if !toFile {
		_, err := opts.IO.Out.Write(conf)
		return err
	}
	if err := atomicfile.WriteFile(opts.Out, conf, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", opts.Out, err)
	}
	spaces, err := chain.Spaces()
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "✓ nats-server configuration for %s (%s: %s) written to %s\n", proj.Root,
		cmdutil.Count(len(spaces), "space"), strings.Join(spaces, ", "), opts.Out)
	fmt.Fprintf(opts.IO.ErrOut, "start it with `nats-server -c %s`, then `cotal up --external <its client URL>`\n", opts.Out)
	return nil
}

// q quotes s for a nats-server configuration (its strings read as JSON's).
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// serverConfig is the nats-server configuration opts ask for, trusting chain's operator.
func serverConfig(opts *ConfigOptions, chain *trust.Chain, root string) ([]byte, error) {
	jwts, err := chain.AccountJWTs()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# nats-server configuration written by `cotal broker config` for the cotal project\n# %s.\n", root)
	p("# It trusts the project's operator and preloads its accounts (public JWTs, no seeds).\n")
	if opts.ClusterName != "" {
		p("# The cluster block holds the routes' password: keep this file private (0600).\n")
	}
	p("# Start it with: nats-server -c <this file>\n\n")
	name := opts.ServerName
	if name == "" {
		name = broker.ServerName
	}
	host, port, _ := hostPort(opts.Listen) // checked
	p("server_name: %s\nhost: %s\nport: %d\n", q(name), q(host), port)
	p("# CONNECT carries user JWTs with many permissions, and subjects long channel names.\n")
	p("max_control_line: %d\n\n", broker.MaxControlLine)
	p("operator: %s\nsystem_account: %s\n\n", q(chain.OperatorJWT()), q(chain.SystemAccount()))
	p("# A full resolver takes account updates at run time ($SYS.REQ.CLAIMS.UPDATE): cotal up\n# --external pushes the account of a new space there.\n")
	p("resolver: {\n  type: full\n  dir: %s\n  allow_delete: false\n}\n\n", q(filepath.Join(opts.StoreDir, "accounts")))
	keys := make([]string, 0, len(jwts))
	for k := range jwts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	p("resolver_preload: {\n")
	for _, k := range keys {
		p("  %s: %s\n", k, q(jwts[k]))
	}
	p("}\n\njetstream: {\n  store_dir: %s\n}\n", q(opts.StoreDir))
	tlsBlock := func(indent string, verify bool) {
		p("%stls: {\n%s  cert_file: %s\n%s  key_file: %s\n", indent, indent, q(opts.TLSCert), indent, q(opts.TLSKey))
		if opts.TLSCA != "" {
			p("%s  ca_file: %s\n", indent, q(opts.TLSCA))
		}
		if verify {
			p("%s  verify: true\n", indent)
		}
		p("%s  timeout: 5\n%s}\n", indent, indent)
	}
	if opts.TLSCert != "" {
		p("\n")
		tlsBlock("", false)
	}
	if opts.ClusterName == "" {
		return []byte(b.String()), nil
	}
	chost, cport, _ := hostPort(opts.ClusterListen) // checked
	secret := chain.RouteSecret()
	routes, _ := broker.ParseRoutes(opts.Routes) // checked
	p("\ncluster: {\n  name: %s\n  host: %s\n  port: %d\n", q(opts.ClusterName), q(chost), cport)
	p("  authorization: {\n    user: %s\n    password: %s\n  }\n", q(broker.RouteUser), q(secret))
	p("  routes: [\n")
	for _, r := range routes {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r, err)
		}
		if u.User == nil {
			u.User = url.UserPassword(broker.RouteUser, secret)
		}
		p("    %s\n", q(u.String()))
	}
	p("  ]\n")
	if opts.ClusterTLS {
		tlsBlock("  ", true)
	}
	p("}\n")
	return []byte(b.String()), nil
}
