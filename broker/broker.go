// Package broker runs the embedded nats-server with JetStream that `cotal up` serves a
// space from. Server wraps it in one small struct: set its fields, Start, use ClientURL,
// Close.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
)

// ServerName is the stable name the embedded server runs under; JetStream derives its node
// name from it, so the same store directory is recovered on every start.
const ServerName = "cotal"

// DefaultPort is the client port tried when Server.Port is 0.
const DefaultPort = 4222

// MaxControlLine is the broker's max_control_line, the longest protocol line it takes:
// subjects carry long channel names, and CONNECT carries the user JWT, which is near the
// 4 KiB default even for an agent with one channel. 64 KiB fits any credential trust mints
// (its permissions are at most trust.MaxPolicySize). This is the one copy of the bound.
const MaxControlLine = 64 << 10

// SyncInterval is how often the broker's file store syncs its blocks to disk, and so
// how often it closes the block files idle for 30 s: nats-server's default, 2 minutes,
// keeps a new stream's file open up to 2.5 minutes, which on a host of thousands of
// spaces is most of the open-file limit (SpaceFiles). Syncing more often also loses less
// on a power cut; what it costs is an fsync of each block written since the last pass.
const SyncInterval = 15 * time.Second

// A client's connect is CONNECT then PING, answered by the server's PONG; nats.go reads the
// first line after CONNECT and fails on anything but PONG ("expected 'PONG', got 'PING'").
// nats-server arms its first PING to a client 2 s (plus up to 20%) after it starts
// handling CONNECT, to measure the round trip early, so a connect whose authentication
// takes longer (at thousands of accounts each first connect of an account builds it, and
// a loaded 2-core host is slower still) gets that PING before its PONG. The broker turns
// the short first PING off (Options.DisableShortFirstPing): the first PING then comes
// after the ping interval (2 minutes), and the round trip is still measured at connect.

// A client has the server's auth timeout, from the moment its connection is accepted,
// to have its CONNECT authenticated; nats-server's default is 2 s. The server's work for
// a connect grows with the accounts it holds (resolving and registering the account's
// claims, and at thousands of accounts every lane of a space host connecting at once),
// and a lane host of 5000 spaces saw its connects closed with "Authentication Timeout"
// on a broker that would have let them in a little later, so each lane retried its whole
// open. A broker of many accounts gives a connect longer (AuthTimeout).
const (
	// defaultAuthTimeout is nats-server's own auth timeout, which a broker of up to
	// authTimeoutPer accounts keeps.
	defaultAuthTimeout = 2 * time.Second
	// authTimeoutPer is how many accounts each defaultAuthTimeout of a connect's time
	// stands for: 1000 accounts 2 s, 2000 accounts 4 s.
	authTimeoutPer = 1000
	// maxAuthTimeout bounds the auth timeout (from 5000 accounts): a client that connects
	// and never authenticates holds its socket no longer than this.
	maxAuthTimeout = 10 * time.Second
)

// AuthTimeout is how long a broker holding accounts accounts gives a client's connect to
// authenticate: nats-server's 2 s up to 1000 accounts, then 2 s more for each 1000, at
// most 10 s.
func AuthTimeout(accounts int) time.Duration {
	d := time.Duration(accounts) * defaultAuthTimeout / authTimeoutPer
	return min(max(d, defaultAuthTimeout), maxAuthTimeout)
}

// readyTimeout bounds the readiness wait when the Start context has no deadline.
const readyTimeout = 10 * time.Second

// ErrPortInUse reports that the listen address is held by another process. It is wrapped
// with the host:port.
var ErrPortInUse = errors.New("port in use: pick another --server port or stop what holds it")

// ErrOpenOffLoopback reports an open (unauthenticated) server asked to listen beyond
// loopback, where anyone who can reach the host could use it.
var ErrOpenOffLoopback = errors.New("an open broker has no authentication, so it listens on loopback only")

// ErrClosed is returned by Start once Close has been called.
var ErrClosed = errors.New("broker: server closed")

// Server is the embedded nats-server with JetStream. Set fields before the first method call.
type Server struct {
	Dir    string       // JetStream store directory; required
	Host   string       // listen host; "" means 127.0.0.1 (loopback)
	Port   int          // 0 means 4222, or any free port when 4222 is taken; -1 means any free port; >0 is explicit and fails with ErrPortInUse when taken
	Logger *slog.Logger // nil means discard; nats-server logs are forwarded to it (debug/info/warn/error levels)

	// Operator mode: with OperatorJWT set, every client needs a user JWT of an account the
	// operator signed. Without it the server runs without authentication (the open dev
	// mesh), which Start allows on a loopback Host only (ErrOpenOffLoopback).
	OperatorJWT   string            // the trusted operator's JWT; "" means open mode
	SystemAccount string            // public key of the system account (operator mode)
	Accounts      map[string]string // account public key -> JWT, stored in the resolver at start
	ResolverDir   string            // where the account resolver keeps JWTs; "" means <Dir>/accounts

	// NodeName is the server's name; "" means ServerName on a standalone server and, in a
	// cluster, a name made on first start and kept in <Dir>/server-name, so every node has
	// its own and keeps it across restarts (JetStream knows a peer by its name).
	NodeName string
	// Cluster, when set, makes the server a node of a NATS cluster: it listens for routes
	// and dials the other nodes, and JetStream replicates across them.
	Cluster *Cluster
	// TLS: with TLSCert and TLSKey set (PEM files), the client port serves TLS only and
	// ClientURL names tls://. TLSCA, when set, is the CA file clients' certificates would
	// be checked against (client certificates are not required). ClusterTLS asks for the
	// same certificate on the cluster (route) port: routes listen and dial with TLS, and
	// each node checks the other's certificate against TLSCA, which is then required
	// (RouteTLSConfig).
	TLSCert, TLSKey, TLSCA string
	ClusterTLS             bool

	once sync.Once // runs start, or marks the server closed when Close comes first
	err  error     // result of the first Start

	initOnce  sync.Once
	done      chan struct{} // closed once the server is down (or never ran)
	closeDone func()        // closes done, once

	mu        sync.Mutex
	ns        *server.Server // set once Start succeeded
	watchDone chan struct{}  // closed when the fatal watcher has returned
	url       string
	listen    string // host:port the client listener is bound to
	cluster   string // host:port the route listener is bound to ("" standalone)
	name      string // the server name it runs under
	capacity  Capacity
	fdCount   fdCounter // Room's count of the open files
}

// init makes the channels that exist before Start.
func (s *Server) init() {
	s.initOnce.Do(func() {
		s.done = make(chan struct{})
		s.closeDone = sync.OnceFunc(func() { close(s.done) })
	})
}

// Start boots the server and returns once it accepts clients; later calls return the first
// result. It honours ctx's deadline and cancellation while booting; ctx does not bound the
// server's life afterwards (Close does).
func (s *Server) Start(ctx context.Context) error {
	s.init()
	s.once.Do(func() {
		s.err = s.start(ctx)
		if s.err != nil {
			s.closeDone()
		}
	})
	return s.err
}

// ClientURL is the URL clients dial, nats://127.0.0.1:<port>, once Start has succeeded; it is
// empty before.
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// ListenAddr is the host:port the client listener is bound to once Start has succeeded
// (0.0.0.0:4222 for a server on every interface, where ClientURL names 127.0.0.1); it is
// empty before.
func (s *Server) ListenAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listen
}

// Done is closed when the server has shut down, for whatever reason: Close, a fatal server
// error, or a Start that failed or never ran before Close.
func (s *Server) Done() <-chan struct{} {
	s.init()
	return s.done
}

// Close shuts the server down and waits until it has stopped. It is safe to call twice and
// before Start; a Start after Close returns ErrClosed. A Close during Start waits for Start
// to return.
func (s *Server) Close() error {
	s.init()
	s.once.Do(func() { s.err = ErrClosed })
	s.mu.Lock()
	ns, watch := s.ns, s.watchDone
	s.mu.Unlock()
	if ns == nil {
		s.closeDone()
		return nil
	}
	ns.Shutdown()
	<-s.done
	<-watch
	return nil
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) start(ctx context.Context) error {
	if s.Dir == "" {
		return errors.New("broker: start: Dir is required")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("broker: start: %w", err)
	}
	log := s.logger()
	host := s.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return fmt.Errorf("broker: tls: %w", ErrTLSPair)
	}
	if !IsLoopback(host) && s.OperatorJWT == "" {
		return fmt.Errorf("broker: listen on %s: %w", host, ErrOpenOffLoopback)
	}
	port, err := choosePort(ctx, host, s.Port)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	name, err := s.serverName()
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	var routes *routeListen
	if s.Cluster != nil {
		if routes, err = s.Cluster.listen(ctx, host, s.OperatorJWT == ""); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		// ClusterTLS: routes listen and dial with TLS, each side checking the other's
		// certificate against TLSCA.
		if routes.tls, err = s.RouteTLSConfig(); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	if port == server.RANDOM_PORT && s.Port == 0 {
		log.Info("default port busy, using a free port", "port", DefaultPort)
	}

	// Every stream keeps a file open while it is new or written (SpaceFiles): take the
	// whole open-file limit the administrator allows, and say what it holds.
	soft, hard, rerr := raiseOpenFiles()
	if rerr != nil {
		log.Warn("broker open-file limit not raised", "err", rerr)
	}
	capacity := CapacityFor(soft, hard)
	if soft > 0 {
		log.Info("broker capacity", "spaces", capacity.Spaces, "open_file_limit", soft, "hard_limit", hard,
			"files_per_space", SpaceFiles, "reserved_files", ReservedFiles, "accounts", len(s.Accounts),
			"auth_timeout", AuthTimeout(len(s.Accounts)))
	}

	debug := log.Enabled(ctx, slog.LevelDebug)
	opts, err := s.options(host, port, name, routes, debug)
	if err != nil {
		return fmt.Errorf("broker: configure: %w", err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("broker: configure: %w", err)
	}
	nl := newNATSLogger(log)
	ns.SetLoggerV2(nl, debug, false, false)

	go func() { // ends when the server is down, which Close and every failure path wait for
		ns.WaitForShutdown()
		s.closeDone()
	}()
	stop := func() {
		ns.Shutdown()
		<-s.done
	}

	booted := make(chan struct{})
	go func() {
		defer close(booted)
		withProcs(APIWorkers, ns.Start) // the JetStream API's workers (APIWorkers)
	}()
	select {
	case <-booted:
	case <-ctx.Done():
		ns.Shutdown()
		<-booted
		<-s.done
		return fmt.Errorf("broker: start: %w", ctx.Err())
	}
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	select {
	case ferr := <-nl.fatal:
		stop()
		if isAddrInUse(ferr) {
			return fmt.Errorf("broker: listen on %s: %w", hp, ErrPortInUse)
		}
		return fmt.Errorf("broker: start: %w", ferr)
	default:
	}
	wait := readyTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if !ns.ReadyForConnections(wait) {
		stop()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("broker: start: %w", err)
		}
		return fmt.Errorf("broker: start: not ready for connections after %s", wait.Round(time.Millisecond))
	}
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		stop()
		return fmt.Errorf("broker: start: no client listener")
	}

	watch := make(chan struct{})
	go func() { // a fatal error after boot stops the server, as nats-server's own logger would exit
		defer close(watch)
		select {
		case ferr := <-nl.fatal:
			log.Error("broker stopping after fatal error", "err", ferr)
			ns.Shutdown()
		case <-s.done:
		}
	}()
	s.mu.Lock()
	s.ns, s.watchDone = ns, watch
	scheme := "nats://"
	if s.TLSCert != "" {
		scheme = "tls://"
	}
	s.url = scheme + net.JoinHostPort(dialHost(host), strconv.Itoa(addr.Port))
	s.listen = net.JoinHostPort(host, strconv.Itoa(addr.Port))
	s.name = name
	s.capacity = capacity
	if ca := ns.ClusterAddr(); ca != nil && s.Cluster != nil {
		s.cluster = net.JoinHostPort(routes.host, strconv.Itoa(ca.Port))
	}
	s.mu.Unlock()
	if s.Cluster != nil {
		log.Info("broker ready", "url", s.ClientURL(), "listen", s.ListenAddr(), "dir", s.Dir,
			"name", name, "cluster", s.Cluster.Name, "cluster_listen", s.ClusterAddr(), "routes", len(s.Cluster.Routes))
		return nil
	}
	log.Info("broker ready", "url", s.ClientURL(), "listen", s.ListenAddr(), "dir", s.Dir)
	return nil
}

// options builds the nats-server configuration.
func (s *Server) options(host string, port int, name string, routes *routeListen, debug bool) (*server.Options, error) {
	opts := &server.Options{
		ServerName:             name,
		Host:                   host,
		Port:                   port,
		JetStream:              true,
		StoreDir:               s.Dir,
		NoSigs:                 true,
		NoLog:                  s.Logger == nil,
		Debug:                  debug,
		MaxControlLine:         MaxControlLine,
		DisableJetStreamBanner: true,
		SyncInterval:           SyncInterval,
		DisableShortFirstPing:  true, // a slow connect must not get a PING before its PONG
	}
	if routes != nil {
		routes.apply(opts)
	}
	if s.TLSCert != "" || s.TLSKey != "" {
		tc, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, tc, tlsTimeout.Seconds()
		opts.TLSCert, opts.TLSKey, opts.TLSCaCert = s.TLSCert, s.TLSKey, s.TLSCA
	}
	if s.OperatorJWT == "" {
		return opts, nil
	}
	op, err := jwt.DecodeOperatorClaims(s.OperatorJWT)
	if err != nil {
		return nil, fmt.Errorf("operator jwt: %w", err)
	}
	dir := s.ResolverDir
	if dir == "" {
		dir = filepath.Join(s.Dir, "accounts")
	}
	// The full resolver takes account updates at runtime ($SYS.REQ.CLAIMS.UPDATE), so a
	// space can be added to a running broker without a restart.
	res, err := server.NewDirAccResolver(dir, 0, 0, server.NoDelete)
	if err != nil {
		return nil, fmt.Errorf("account resolver %s: %w", dir, err)
	}
	for pub, token := range s.Accounts {
		if err := res.Store(pub, token); err != nil {
			return nil, fmt.Errorf("account resolver: store %s: %w", pub, err)
		}
	}
	// The auth timeout is chosen from the accounts the broker starts with (`cotal up`
	// passes every space of the trust chain); with TLS it is never below nats-server's
	// default there, the TLS handshake's bound and a second.
	opts.AuthTimeout = AuthTimeout(len(s.Accounts)).Seconds()
	if opts.TLS {
		opts.AuthTimeout = max(opts.AuthTimeout, opts.TLSTimeout+1)
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{op}
	opts.SystemAccount = s.SystemAccount
	opts.AccountResolver = res
	return opts, nil
}

// IsLoopback reports whether a server listening on host only accepts local connections:
// localhost, a loopback address, or "" (which Server reads as 127.0.0.1).
func IsLoopback(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialHost is the host a local client dials for a server listening on host.
func dialHost(host string) string {
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.Equal(net.IPv4zero)):
		return "127.0.0.1"
	case ip != nil && ip.Equal(net.IPv6unspecified):
		return "::1"
	}
	return host
}
