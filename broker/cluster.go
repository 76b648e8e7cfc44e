package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// RouteUser is the user name routes authenticate with when Cluster.Secret is set.
const RouteUser = "cotal-route"

// serverNameFile keeps a cluster node's server name in its store directory.
const serverNameFile = "server-name"

// ErrNoClusterName reports a cluster without a name.
var ErrNoClusterName = errors.New("a cluster needs a name, the same on every node")

// Cluster makes an embedded server a node of a NATS cluster. Every node of one cluster has
// the same Name and Secret and lists the others (or some of them: the rest is learnt by
// gossip) in Routes.
type Cluster struct {
	Name string // cluster name, the same on every node; required
	// Host is the host routes listen on; "" means the server's client Host.
	Host string
	// Port is the route port; 0 or -1 means any free port (the node can then only dial the
	// others, never be named in their Routes), >0 is explicit and fails with ErrPortInUse
	// when taken.
	Port int
	// Routes are the other nodes' route URLs, nats://host:port; the node's own URL may be
	// listed too (one list for every node) and is ignored by the server.
	Routes []string
	// Secret, when set, is the password routes authenticate with (user RouteUser): a node
	// that does not know it cannot join. Every node must have the same.
	Secret string
	// TLS, when set, is the TLS configuration of the route listener and of the routes this
	// node dials.
	TLS *tls.Config
}

// routeListen is a cluster's route configuration, resolved for one start.
type routeListen struct {
	c      *Cluster
	host   string
	port   int
	routes []*url.URL
	tls    *tls.Config // the route TLS of Server.ClusterTLS; nil means c.TLS
}

// ParseRoutes reads a comma-separated list of route URLs (nats://host:port), the form the
// --routes flag takes. Every URL needs a host and a port.
func ParseRoutes(list string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(list, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if _, err := parseRoute(r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// parseRoute reads one route URL.
func parseRoute(r string) (*url.URL, error) {
	u, err := url.Parse(r)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "nats-route" && u.Scheme != "tls") || u.Host == "" {
		return nil, fmt.Errorf("route %q is not a nats://host:port URL", r)
	}
	if _, p, err := net.SplitHostPort(u.Host); err != nil || p == "" {
		return nil, fmt.Errorf("route %q needs a port, e.g. nats://10.0.0.2:6222", r)
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("route %q: port %q is not 1 to 65535", r, p)
	}
	return u, nil
}

// listen resolves the cluster's configuration: its route host and port (probing an
// explicit port first) and its routes, which carry the route credential when Secret is set.
func (c *Cluster) listen(ctx context.Context, clientHost string, open bool) (*routeListen, error) {
	if c.Name == "" {
		return nil, ErrNoClusterName
	}
	if strings.ContainsAny(c.Name, " \t\r\n.*>") {
		return nil, fmt.Errorf("cluster name %q: want letters, digits, _ and - (no spaces, dots or wildcards)", c.Name)
	}
	host := c.Host
	if host == "" {
		host = clientHost
	}
	if open && !IsLoopback(host) {
		return nil, fmt.Errorf("cluster listen on %s: %w", host, ErrOpenOffLoopback)
	}
	port := c.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if port != server.RANDOM_PORT {
		p, err := choosePort(ctx, host, port)
		if err != nil {
			return nil, fmt.Errorf("cluster %w", err)
		}
		port = p
	}
	rl := &routeListen{c: c, host: host, port: port}
	for _, r := range c.Routes {
		u, err := parseRoute(r)
		if err != nil {
			return nil, err
		}
		if c.Secret != "" && u.User == nil {
			u.User = url.UserPassword(RouteUser, c.Secret)
		}
		rl.routes = append(rl.routes, u)
	}
	return rl, nil
}

// apply sets the cluster's part of the nats-server options.
func (rl *routeListen) apply(opts *server.Options) {
	tc := rl.tls
	if tc == nil {
		tc = rl.c.TLS
	}
	opts.Cluster = server.ClusterOpts{
		Name:      rl.c.Name,
		Host:      rl.host,
		Port:      rl.port,
		TLSConfig: tc,
	}
	if tc != nil {
		opts.Cluster.TLSTimeout = 2
	}
	if rl.c.Secret != "" {
		opts.Cluster.Username, opts.Cluster.Password = RouteUser, rl.c.Secret
	}
	opts.Routes = rl.routes
}

// serverName is the name the server runs under: NodeName, ServerName when standalone, or the
// node's kept name in a cluster (made on first start).
func (s *Server) serverName() (string, error) {
	if s.NodeName != "" {
		return s.NodeName, nil
	}
	if s.Cluster == nil {
		return ServerName, nil
	}
	path := filepath.Join(s.Dir, serverNameFile)
	b, err := os.ReadFile(path)
	if err == nil {
		name := strings.TrimSpace(string(b))
		if name == "" || strings.ContainsAny(name, " \t.*>") {
			return "", fmt.Errorf("server name in %s is %q: remove the file to make a new one (a new name is a new JetStream peer)", path, name)
		}
		return name, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read server name: %w", err)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", fmt.Errorf("store %s: %w", s.Dir, err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("server name: %w", err)
	}
	name := "cotal-" + hex.EncodeToString(rnd[:])
	if host, err := os.Hostname(); err == nil {
		if h := sanitizeName(host); h != "" {
			name = "cotal-" + h + "-" + hex.EncodeToString(rnd[:])
		}
	}
	if err := writeFileAtomic(path, []byte(name+"\n")); err != nil {
		return "", fmt.Errorf("keep server name: %w", err)
	}
	return name, nil
}

// sanitizeName keeps the letters, digits, - and _ of a host name (its first label).
func sanitizeName(host string) string {
	host, _, _ = strings.Cut(host, ".")
	var b strings.Builder
	for _, r := range host {
		if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// writeFileAtomic writes path by temp file, fsync and rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// Name is the server name the server runs under once Start has succeeded; "" before.
func (s *Server) Name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// ClusterAddr is the host:port the route listener is bound to once Start has succeeded
// with Cluster set; "" otherwise.
func (s *Server) ClusterAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cluster
}

// ClusterURL is the route URL other nodes list in their Routes, nats://host:port, once
// Start has succeeded with Cluster set; "" otherwise.
func (s *Server) ClusterURL() string {
	a := s.ClusterAddr()
	if a == "" {
		return ""
	}
	host, port, _ := net.SplitHostPort(a)
	return "nats://" + net.JoinHostPort(dialHost(host), port)
}

// Routes is how many nodes the server routes to now (0 standalone).
func (s *Server) Routes() int {
	s.mu.Lock()
	ns := s.ns
	s.mu.Unlock()
	if ns == nil {
		return 0
	}
	return ns.NumRoutes()
}

// jetStreamPoll is how often WaitJetStream looks at the JetStream meta group.
const jetStreamPoll = 50 * time.Millisecond

// WaitJetStream returns once JetStream serves requests: at once on a standalone server; in
// a cluster once the meta group has a leader and this node is current with it, which needs
// a quorum of the nodes to be up. progress, when not nil, is called once with what is
// awaited if the wait is not over at once. It fails when ctx ends first.
func (s *Server) WaitJetStream(ctx context.Context, progress func(string)) error {
	s.mu.Lock()
	ns := s.ns
	s.mu.Unlock()
	if ns == nil {
		return errors.New("broker: wait for JetStream: the server is not running")
	}
	if s.Cluster == nil {
		return nil
	}
	t := time.NewTicker(jetStreamPoll)
	defer t.Stop()
	told := false
	for {
		if ns.JetStreamIsCurrent() {
			if info, err := ns.Jsz(nil); err == nil && info.Meta != nil && info.Meta.Leader != "" {
				return nil
			}
		}
		if !told && progress != nil {
			told = true
			progress(fmt.Sprintf("waiting for a quorum of cluster %s (this node routes to %d others)", s.Cluster.Name, ns.NumRoutes()))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: wait for JetStream of cluster %s: %w (routes up: %d)", s.Cluster.Name, ctx.Err(), ns.NumRoutes())
		case <-s.done:
			return errors.New("broker: wait for JetStream: the server stopped")
		case <-t.C:
		}
	}
}
