// Package a2a implements `cotal a2a`: the inbound A2A gateway of one space (serve, the
// default action) and `cotal a2a token`, which mints the bearer tokens callers off
// loopback present.
package a2a

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/a2a/peers"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// DefaultListen is where the gateway listens without --listen.
const DefaultListen = "127.0.0.1:7800"

// Actor is the gateway's identity in the space (local.a2a).
const Actor = "a2a"

// Options are the flags of `cotal a2a`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Resolve    cmdutil.ResolveFunc
	Connect    cmdutil.ConnectFunc
	AgentCreds cmdutil.AgentCredsFunc
	Getwd      func() (string, error)
	Getenv     func(string) string
	Logger     *slog.Logger
	Executable func() (string, error) // finds this binary for --detach (launch.Command)

	Mesh        cmdutil.MeshFlags
	Listen      string
	Expose      []string
	AllowRemote bool
	AllowHosts  []string
	TLSCert     string
	TLSKey      string
	Detach      bool
	PidFile     string // hidden: the pidfile a detached child writes once it serves
	// Bridge presents the space's registered external A2A agents as peers until ctx ends
	// (package peers); nil runs none.
	Bridge func(ctx context.Context, t cmdutil.Target) error
}

// NewCmdA2A builds `cotal a2a` and its subcommands.
func NewCmdA2A(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Resolve: f.Resolve, Connect: f.Connect, AgentCreds: f.AgentCreds, Getwd: f.Getwd, Getenv: f.Getenv, Logger: f.Logger, Executable: f.Executable}
	cmd := &cobra.Command{
		Use:   "a2a [--listen 127.0.0.1:7800] --expose ROLE|NAME ... [--detach] [--allow-remote --tls-cert F --tls-key F]",
		Short: "Serve a space's agents to A2A clients (Agent2Agent protocol, JSON-RPC)",
		Long: `Make agents and roles of a space reachable by any A2A (Agent2Agent, v0.3) client:
Google ADK, LangGraph, CrewAI or a custom service. Each exposed name gets an Agent Card at
/agents/<name>/.well-known/agent-card.json, built from its presence card, and a JSON-RPC
endpoint at /agents/<name> (message/send, message/stream, tasks/get, tasks/cancel,
tasks/resubscribe, tasks/pushNotificationConfig/set and get). The gateway's own card is
/.well-known/agent-card.json.

--expose takes role:NAME (an anycast ask: one holder of the role takes the task),
agent:NAME (a direct message to that agent), or a bare NAME (a role some peer holds, else
an agent of that name). The gateway sends as its own identity, local.a2a, an agent that
may send direct messages and asks and read its own task bucket, nothing more: a caller
acts with those permissions. The agent's replies (replyTo the message) update the task;
a reply starting with [input-required] asks the caller for input, [working] reports
progress, [failed] fails the task; any other reply completes it.

Tasks live in the space's cotal_a2a_<space> bucket: a gateway restarted mid-task
completes the task when the reply arrives.

It listens on loopback only and answers only requests naming a loopback host (or an
--allow-host name) with its port, and refuses a web page's cross-site request. Off
loopback it needs --allow-remote, which then requires TLS (--tls-cert, --tls-key) and a
bearer token on every call, on any address (mint one with ` + "`cotal a2a token`" + `); the
cards then declare the bearer scheme.

--detach runs the gateway in the background (pidfile and log in .cotal/a2a/, its URL in
.cotal/a2a/serve.url, shown by ` + "`cotal status`" + `); ` + "`cotal down a2a`" + ` stops it, and a bare
` + "`cotal down`" + ` stops it with the mesh.`,
		Example: `  cotal a2a --expose reviewer
  cotal a2a --detach --expose reviewer   # stop it with: cotal down a2a
  cotal a2a --listen 127.0.0.1:7801 --expose agent:bob --expose role:triage
  cotal a2a token --name ci --ttl 720h
  cotal a2a --listen 0.0.0.0:7800 --allow-remote --tls-cert gw.pem --tls-key gw.key --allow-host a2a.example.com --expose reviewer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkServe(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runServe(cmd.Context(), opts)
		},
	}
	opts.Mesh.Register(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&opts.Listen, "listen", DefaultListen, "address to listen on (loopback unless --allow-remote)")
	fl.StringArrayVar(&opts.Expose, "expose", nil, "a role or agent callers may address: role:NAME, agent:NAME or NAME (repeat for more)")
	fl.BoolVar(&opts.AllowRemote, "allow-remote", false, "allow a non-loopback --listen; every call then needs TLS (--tls-cert, --tls-key) and a token from cotal a2a token, and push notifications may go off loopback")
	fl.StringArrayVar(&opts.AllowHosts, "allow-host", nil, "a DNS name callers may use in Host, beyond localhost (repeat for more)")
	fl.StringVar(&opts.TLSCert, "tls-cert", "", "TLS certificate file (PEM) to serve with")
	fl.StringVar(&opts.TLSKey, "tls-key", "", "TLS private key file (PEM) of --tls-cert")
	fl.BoolVar(&opts.Detach, "detach", false, "run in the background; cotal down a2a stops it")
	fl.StringVar(&opts.PidFile, "pidfile", "", "pidfile to write once serving (used by --detach)")
	_ = fl.MarkHidden("pidfile") // the flag exists; hiding it cannot fail

	cmd.AddCommand(NewCmdToken(f, nil))
	// The outbound peers: cotal a2a add, rm, ls and bridge (package peers), whose bridge
	// also runs beside the gateway.
	cmd.AddCommand(peers.Commands(f)...)
	opts.Bridge = func(ctx context.Context, t cmdutil.Target) error { return peers.RunBridge(ctx, f, t, opts.Logger, nil) }
	return cmd
}

// checkServe refuses bad flags before anything is touched.
func checkServe(opts *Options) error {
	host, port, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return cmdutil.FlagErrorf("--listen %s: want HOST:PORT such as %s", strconv.QuoteToASCII(opts.Listen), DefaultListen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return cmdutil.FlagErrorf("--listen %s: the port is 0 to 65535 (0 picks a free one)", opts.Listen)
	}
	if len(opts.Expose) == 0 {
		return cmdutil.FlagErrorf("--expose: name at least one role or agent callers may address, such as --expose reviewer")
	}
	for _, e := range opts.Expose {
		if err := a2agw.CheckExpose(e); err != nil {
			return cmdutil.FlagErrorf("%v", err)
		}
	}
	for _, h := range opts.AllowHosts {
		if h == "" || net.ParseIP(h) != nil || strings.ContainsAny(h, " /:@") {
			return cmdutil.FlagErrorf("--allow-host %s: want one DNS name such as a2a.example.com", strconv.QuoteToASCII(h))
		}
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return cmdutil.FlagErrorf("--tls-cert and --tls-key go together")
	}
	if !opts.AllowRemote {
		if loopback(host) {
			return nil
		}
		return cmdutil.RefuseUsage("--listen "+opts.Listen,
			"the gateway lets callers message the space's agents as its identity, so it listens on loopback only unless --allow-remote (which then needs TLS and a bearer token)",
			"cotal a2a --listen "+DefaultListen+" --expose "+opts.Expose[0])
	}
	if opts.TLSCert == "" {
		return cmdutil.RefuseUsage("--allow-remote without TLS",
			"off loopback the bearer token and every message would cross the network in the clear",
			"cotal a2a --listen "+opts.Listen+" --allow-remote --tls-cert CERT.pem --tls-key KEY.pem --expose "+opts.Expose[0])
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokensPath is where a project keeps the gateway's bearer token hashes.
func tokensPath(p *workspace.Project) string { return filepath.Join(p.Dir(), "a2a", "tokens.json") }

func runServe(ctx context.Context, opts *Options) error {
	t, err := opts.Resolve(opts.Mesh)
	if err != nil {
		return err
	}
	if opts.Detach {
		return detach(ctx, opts, t)
	}
	host, _, _ := net.SplitHostPort(opts.Listen)
	var bearer func(string) bool
	if opts.AllowRemote {
		if t.Project == nil {
			return cmdutil.Refuse("--allow-remote outside a project", "bearer tokens live in the project's .cotal/a2a/tokens.json", "cotal up")
		}
		f, err := a2agw.ReadTokens(tokensPath(t.Project))
		if err != nil {
			return err
		}
		if f.Live(time.Now()) == 0 {
			return cmdutil.Refuse("--allow-remote without a bearer token", "every call off loopback must carry one, and the project has none that is live", "cotal a2a token --name caller")
		}
		bearer = a2agw.Bearer(tokensPath(t.Project), time.Now)
	}
	var tlsCfg *tls.Config
	if opts.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", opts.TLSCert, opts.TLSKey, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	ep, err := connect(ctx, opts, t)
	if err != nil {
		return err
	}
	defer ep.Close()
	if err := ep.Join(ctx); err != nil {
		return fmt.Errorf("join space %s as %s: %w", t.Space, ep.Principal(), err)
	}
	js, err := jetstream.New(ep.Conn())
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketA2A(t.Space))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return cmdutil.Refuse("space "+t.Space+" without the A2A task bucket", "the space was made before the gateway existed", "cotal up")
	}
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", protocol.BucketA2A(t.Space), err)
	}

	board, err := taskboard.Connect(ctx, ep.Conn(), t.Space, ep.Principal(), taskboard.Options{})
	if err != nil { // a space made before the board: role tasks are not mirrored
		fmt.Fprintf(opts.IO.ErrOut, "! %v; tasks for roles are not shown on the task board\n", err)
		board = nil
	}

	ln, err := net.Listen("tcp", opts.Listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		return cmdutil.Refuse("--listen "+opts.Listen, "another process already listens there", "cotal a2a --listen "+host+":0 --expose "+opts.Expose[0])
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	shown := host
	if host == "0.0.0.0" || host == "::" || host == "" {
		shown = "127.0.0.1"
	}
	if len(opts.AllowHosts) > 0 && opts.AllowRemote {
		shown = opts.AllowHosts[0]
	}
	base := scheme + "://" + net.JoinHostPort(shown, strconv.Itoa(port))
	g, err := a2agw.New(a2agw.Config{Endpoint: ep, Bucket: kv, Expose: opts.Expose, BaseURL: base, Port: port,
		Hosts: opts.AllowHosts, Bearer: bearer, AllowRemotePush: opts.AllowRemote, Logger: opts.Logger, Board: board})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- g.Run(ctx) }()
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			served <- srv.ServeTLS(ln, "", "")
			return
		}
		served <- srv.Serve(ln)
	}()

	fmt.Fprintf(opts.IO.Out, "✓ cotal a2a: %s/.well-known/agent-card.json (space %s, as %s)\n", base, t.Space, ep.Principal())
	for _, e := range opts.Expose {
		n := e[strings.Index(e, ":")+1:]
		fmt.Fprintf(opts.IO.Out, "  %s: %s/agents/%s\n", e, base, n)
	}
	if t.Project != nil {
		if err := os.MkdirAll(filepath.Dir(URLPath(t.Project)), 0o700); err == nil {
			if err := atomicfile.WriteFile(URLPath(t.Project), []byte(base+"\n"), 0o600); err == nil {
				defer os.Remove(URLPath(t.Project))
			}
		}
	}
	pid := &cmdutil.Pidfile{Path: opts.PidFile}
	if err := pid.Write(); err != nil {
		return err
	}
	defer pid.Remove(opts.IO.ErrOut)
	if err := cmdutil.SignalReady(opts.Getenv, base); err != nil {
		return err
	}

	bridgeDone := make(chan struct{})
	go func() {
		defer close(bridgeDone)
		if opts.Bridge == nil {
			return
		}
		if err := opts.Bridge(ctx, t); err != nil && ctx.Err() == nil {
			fmt.Fprintf(opts.IO.ErrOut, "! a2a peers not bridged: %v\n", err)
		}
	}()
	defer func() { cancel(); <-bridgeDone }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-runDone:
		runDone <- err
		runErr = err
	case err := <-served:
		runErr = fmt.Errorf("serve %s: %w", opts.Listen, err)
	}
	cancel()
	shut, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(shut); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop serving: %w", err)
	}
	if err := <-runDone; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// connect connects as the gateway's identity: on an authenticated mesh with the
// project's keys, an agent credential minted for local.a2a with the a2a-gateway
// capability (its DMs and asks, its task bucket); with --creds, that credential; on an
// open mesh, the name alone.
func connect(ctx context.Context, opts *Options, t cmdutil.Target) (*client.Endpoint, error) {
	cfg := client.Config{Name: Actor, Actor: Actor, Kind: protocol.CardEndpoint,
		Description: "A2A gateway: A2A callers' messages to this space",
		Meta:        map[string]any{"service": "a2a"}}
	if !t.Auth() {
		return opts.Connect(ctx, t, cfg, cmdutil.As{Join: true})
	}
	if t.Creds == "" && t.CredsData == nil {
		creds, err := opts.AgentCreds(ctx, t, trust.UserSpec{Name: Actor, Profile: trust.ProfileAgent,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: Actor}, Subscribe: []string{},
			Capabilities: []string{trust.CapabilityA2AGateway}})
		if err != nil {
			return nil, err
		}
		t.CredsData = creds
	}
	return opts.Connect(ctx, t, cfg, cmdutil.As{})
}
