// Package brokertest starts a broker.Server for integration tests: loopback, a free port,
// the store in t.TempDir(), logs through t.Log, stopped in t.Cleanup.
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker"
)

// Start boots a broker for the test and stops it, waiting, when the test ends. It fails the
// test with t.Fatalf if the broker does not start.
func Start(t testing.TB) *broker.Server {
	t.Helper()
	s := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: Logger(t)}
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // Close waits, so TempDir removal cannot race it
	return s
}

// StartOperator starts the broker in operator mode: it trusts operatorJWT, uses
// systemAccount, and serves accounts (public key -> JWT) from its resolver. Loopback, free
// port, store in t.TempDir(), stopped at cleanup.
func StartOperator(t testing.TB, operatorJWT, systemAccount string, accounts map[string]string) *broker.Server {
	t.Helper()
	s := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: Logger(t),
		OperatorJWT: operatorJWT, SystemAccount: systemAccount, Accounts: accounts}
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("start operator-mode broker: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Logger returns a logger that writes each record, at info level and above, with t.Logf.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // t.Log output is already per test; keep lines short
			}
			return a
		},
	}))
}

// testWriter hands each line a slog handler writes to t.Logf.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// StartCluster boots n brokers on loopback as the nodes of one cluster (name "test"),
// each with its own store in t.TempDir(), and returns once JetStream has a quorum. A
// JetStream cluster needs its routes configured from the start, so the route ports are
// picked first (listen on port 0, close) and every node lists all of them; when another
// process takes one of them before its node binds it, the whole cluster is started again
// on new ports. configure, when not nil, sets more fields of each node (operator mode, a
// route secret) before it starts. The nodes stop when the test ends.
func StartCluster(t testing.TB, n int, configure func(i int, s *broker.Server)) []*broker.Server {
	t.Helper()
	for attempt := 0; ; attempt++ {
		nodes, err := startCluster(t, n, configure)
		if err == nil {
			return nodes
		}
		if !errors.Is(err, broker.ErrPortInUse) || attempt == 4 {
			t.Fatal(err)
		}
		t.Logf("cluster port taken, starting again: %v", err)
	}
}

func startCluster(t testing.TB, n int, configure func(i int, s *broker.Server)) ([]*broker.Server, error) {
	routes, ports, err := FreeRoutes(n)
	if err != nil {
		return nil, err
	}
	var nodes []*broker.Server
	stop := func() {
		for _, s := range nodes {
			_ = s.Close()
		}
	}
	for i := range n {
		s := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: Logger(t),
			Cluster: &broker.Cluster{Name: "test", Port: ports[i], Routes: routes}}
		if configure != nil {
			configure(i, s)
		}
		if err := s.Start(t.Context()); err != nil {
			stop()
			return nil, fmt.Errorf("start cluster node %d: %w", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		nodes = append(nodes, s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard
	defer cancel()
	for i, s := range nodes {
		if err := s.WaitJetStream(ctx, nil); err != nil {
			stop()
			return nil, fmt.Errorf("cluster node %d: %w", i, err)
		}
	}
	return nodes, nil
}

// FreeRoutes picks n free loopback ports (each listened on and released) and returns them
// with their route URLs. Another process may take a port before it is bound again: a
// caller retries on broker.ErrPortInUse.
func FreeRoutes(n int) ([]string, []int, error) {
	var urls []string
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("pick a route port: %w", err)
		}
		ls = append(ls, l)
		p := l.Addr().(*net.TCPAddr).Port
		ports = append(ports, p)
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	return urls, ports, nil
}

// Restart starts a fresh Server on the store and route port of a stopped node, with the
// same fields, its routes set to its own and the route URLs of others (the nodes still
// up), and stops it when the test ends. The node keeps its server name (kept in its store), so JetStream knows it again.
func Restart(t testing.TB, old *broker.Server, others ...*broker.Server) *broker.Server {
	t.Helper()
	c := *old.Cluster
	c.Routes = []string{old.ClusterURL()}
	c.Port = old.Cluster.Port
	if c.Port <= 0 {
		c.Port = portOf(t, old.ClusterURL())
	}
	for _, o := range others {
		c.Routes = append(c.Routes, o.ClusterURL())
	}
	s := &broker.Server{Dir: old.Dir, Host: old.Host, Port: -1, Logger: old.Logger, NodeName: old.NodeName,
		OperatorJWT: old.OperatorJWT, SystemAccount: old.SystemAccount, Accounts: old.Accounts,
		ResolverDir: old.ResolverDir, Cluster: &c}
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("restart cluster node: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// portOf is the port of a nats://host:port URL.
func portOf(t testing.TB, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(u, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
