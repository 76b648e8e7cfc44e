package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
)

// waitClosed fails the test unless ch is closed within a hang guard.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not closed", what)
	}
}

func port(t *testing.T, clientURL string) int {
	t.Helper()
	u, err := url.Parse(clientURL)
	if err != nil {
		t.Fatalf("parse %q: %v", clientURL, err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("port of %q: %v", clientURL, err)
	}
	return p
}

func TestStartServesJetStream(t *testing.T) {
	srv := brokertest.Start(t)
	if !strings.HasPrefix(srv.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("client url %q, want nats://127.0.0.1:<port>", srv.ClientURL())
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx := t.Context()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "t.one", []byte("hello")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	m, err := st.GetLastMsgForSubject(ctx, "t.one")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if string(m.Data) != "hello" {
		t.Fatalf("stored %q, want hello", m.Data)
	}
	select {
	case <-srv.Done():
		t.Fatal("Done closed while the server runs")
	default:
	}
}

func TestCloseClosesDone(t *testing.T) {
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t)}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	waitClosed(t, srv.Done(), "Done after Close")
	waitClosed(t, closed, "client connection after Close")
	if err := srv.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start after a successful Start and Close: %v, want the first result (nil)", err)
	}
}

func TestStartTwiceReturnsFirstResult(t *testing.T) {
	srv := brokertest.Start(t)
	url := srv.ClientURL()
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if srv.ClientURL() != url {
		t.Fatalf("url changed from %q to %q", url, srv.ClientURL())
	}

	bad := &broker.Server{Port: -1} // no Dir
	first := bad.Start(t.Context())
	if first == nil {
		t.Fatal("start without Dir succeeded")
	}
	if second := bad.Start(t.Context()); second != first {
		t.Fatalf("second start gave %v, want the first error %v", second, first)
	}
	waitClosed(t, bad.Done(), "Done after a failed Start")
}

func TestConcurrentStart(t *testing.T) {
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t)}
	t.Cleanup(func() { _ = srv.Close() })
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = srv.Start(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
}

func TestExplicitPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	defer l.Close()
	held := l.Addr().(*net.TCPAddr).Port

	srv := &broker.Server{Dir: t.TempDir(), Port: held, Logger: brokertest.Logger(t)}
	err = srv.Start(t.Context())
	if !errors.Is(err, broker.ErrPortInUse) {
		t.Fatalf("start on a held port: %v, want ErrPortInUse", err)
	}
	hp := "127.0.0.1:" + strconv.Itoa(held)
	if !strings.Contains(err.Error(), hp) || !strings.Contains(err.Error(), "pick another --server port") {
		t.Fatalf("error %q should name %s and say what to do", err, hp)
	}
	waitClosed(t, srv.Done(), "Done after a failed Start")
	if err := srv.Close(); err != nil {
		t.Fatalf("close after failed start: %v", err)
	}
}

func TestDefaultPortFallsBackWhenBusy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:4222")
	switch {
	case err == nil:
		defer l.Close()
	case errors.Is(err, syscall.EADDRINUSE):
		// something else holds 4222 already: the case under test
	default:
		t.Skipf("cannot bind 127.0.0.1:4222 to make it busy: %v", err)
	}
	srv := &broker.Server{Dir: t.TempDir(), Logger: brokertest.Logger(t)} // Port 0
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("start with 4222 busy: %v", err)
	}
	defer srv.Close()
	if p := port(t, srv.ClientURL()); p == 4222 || p == 0 {
		t.Fatalf("client url %q, want a free port other than 4222", srv.ClientURL())
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	nc.Close()
}

func TestCloseBeforeStart(t *testing.T) {
	srv := &broker.Server{Dir: t.TempDir(), Port: -1}
	if err := srv.Close(); err != nil {
		t.Fatalf("close before start: %v", err)
	}
	waitClosed(t, srv.Done(), "Done after Close before Start")
	if err := srv.Start(t.Context()); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("start after close: %v, want ErrClosed", err)
	}
	if srv.ClientURL() != "" {
		t.Fatalf("client url %q for a server that never ran", srv.ClientURL())
	}
}

func TestStartHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	srv := &broker.Server{Dir: t.TempDir(), Port: -1}
	if err := srv.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("start with a cancelled context: %v, want context.Canceled", err)
	}
	waitClosed(t, srv.Done(), "Done after a cancelled Start")
}

func TestBadPort(t *testing.T) {
	srv := &broker.Server{Dir: t.TempDir(), Port: 70000}
	if err := srv.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "70000") {
		t.Fatalf("start on port 70000: %v, want an error naming the port", err)
	}
}

// recorder is a slog handler that keeps every record.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) has(level slog.Level, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Level == level && strings.Contains(rec.Message, text) {
			return true
		}
	}
	return false
}

func TestForwardsServerLogs(t *testing.T) {
	rec := &recorder{}
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: slog.New(rec)}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer srv.Close()
	if !rec.has(slog.LevelInfo, "Server is ready") {
		t.Fatal("nats-server's ready notice was not forwarded at info level")
	}
	if !rec.has(slog.LevelDebug, "Go build") {
		t.Fatal("nats-server's debug lines were not forwarded although the handler enables debug")
	}
}

func TestFatalStartErrorIsReturned(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatalf("write: %v", err)
	}
	srv := &broker.Server{Dir: file, Port: -1, Logger: brokertest.Logger(t)}
	err := srv.Start(t.Context()) // nats-server calls Fatalf; the process must live on
	if err == nil {
		_ = srv.Close()
		t.Fatal("start with a file as the store directory succeeded")
	}
	if !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("error %q should say JetStream could not start", err)
	}
	waitClosed(t, srv.Done(), "Done after a fatal start error")
}

// TestOpenOffLoopbackRefused: an open (unauthenticated) server refuses a host beyond
// loopback before it binds anything; loopback hosts start.
func TestOpenOffLoopbackRefused(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		srv := &broker.Server{Dir: t.TempDir(), Host: host, Port: -1}
		err := srv.Start(t.Context())
		if !errors.Is(err, broker.ErrOpenOffLoopback) {
			t.Errorf("open server on %s: %v, want ErrOpenOffLoopback", host, err)
		}
		if srv.ClientURL() != "" || srv.ListenAddr() != "" {
			t.Errorf("open server on %s: url %q, listen %q after a refusal", host, srv.ClientURL(), srv.ListenAddr())
		}
	}
	for _, host := range []string{"", "127.0.0.1", "localhost"} {
		if !broker.IsLoopback(host) {
			t.Errorf("IsLoopback(%q) = false", host)
		}
	}
}

// TestListenAddrNamesTheBoundPort: with any free port, ListenAddr and ClientURL name the
// port the server really bound.
func TestListenAddrNamesTheBoundPort(t *testing.T) {
	srv := brokertest.Start(t)
	p := port(t, srv.ClientURL())
	if p == 0 || srv.ListenAddr() != net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) {
		t.Fatalf("listen %q, client url %q", srv.ListenAddr(), srv.ClientURL())
	}
}
