// Package brokertest starts a broker.Server for integration tests: loopback, a free port,
// the store in t.TempDir(), logs through t.Log, stopped in t.Cleanup.
package brokertest

import (
	"log/slog"
	"strings"
	"testing"

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
