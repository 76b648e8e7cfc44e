package delivery

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"

	"github.com/nats-io/nats.go"
)

// lockedBuf is a log sink safe for the lane's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// presenceStatus reads actor's presence status as the provisioner ("" without an entry).
func (m *mesh) presenceStatus(actor string) protocol.Status {
	m.t.Helper()
	kv, err := m.js.KeyValue(m.t.Context(), protocol.BucketPresence(space))
	if err != nil {
		m.t.Fatal(err)
	}
	e, err := kv.Get(m.t.Context(), protocol.OwnerLocal+"."+actor)
	if err != nil {
		return ""
	}
	var p protocol.Presence
	if json.Unmarshal(e.Value(), &p) != nil {
		return ""
	}
	return p.Status
}

// cutJoin joins actor through a loopback listener the test owns and returns the func that
// cuts the agent off for good.
func (m *mesh) cutJoin(actor string) (cut func()) {
	m.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	cut = func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}
	m.t.Cleanup(cut)
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", strings.TrimPrefix(m.URL, "nats://"))
			if err != nil {
				_ = a.Close()
				return
			}
			mu.Lock()
			conns = append(conns, a, b)
			mu.Unlock()
			go func() { _, _ = copyConn(a, b) }()
			go func() { _, _ = copyConn(b, a) }()
		}
	}()
	c, err := trust.ReadCreds(m.agent(actor))
	if err != nil {
		m.t.Fatal(err)
	}
	ep, err := client.Connect(m.t.Context(), "nats://"+ln.Addr().String(), client.Config{Space: space, Name: actor,
		LifecycleUID: c.LifecycleUID, Heartbeat: time.Hour}, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = ep.Close() })
	if err := ep.Join(m.t.Context()); err != nil {
		m.t.Fatal(err)
	}
	return cut
}

func copyConn(dst, src net.Conn) (int64, error) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// With the system credential cotal up gives it (trust.WatchCreds) the lane marks an agent offline as soon as its connection is
// cut, well before the presence TTL (which would delete the entry, not write it offline).
func TestLaneMarksCutAgentOffline(t *testing.T) {
	m := newMesh(t, 0)
	l := m.lane()
	sys, err := m.Chain.WatchCreds(space) // the least-privilege credential cotal up gives the daemon
	if err != nil {
		t.Fatal(err)
	}
	l.SystemCreds = sys
	serve(t, l)
	cut := m.cutJoin("alice")
	if st := m.presenceStatus("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q after join, want idle", st)
	}
	t0 := time.Now()
	cut()
	meshtest.Until(t, "alice written offline", protocol.LivenessWindow/2, func() bool {
		return m.presenceStatus("alice") == protocol.StatusOffline
	})
	t.Logf("alice offline within %s of the cut", time.Since(t0))
}

// Without a system credential the lane keeps the TTL behaviour and says so in its log.
func TestLaneWithoutSystemCredsSaysTTL(t *testing.T) {
	m := newMesh(t, 0)
	l := m.lane()
	var logs lockedBuf
	l.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	serve(t, l)
	if !strings.Contains(logs.String(), "presence goes offline by its TTL only") {
		t.Fatalf("the daemon log does not say presence falls back to its TTL:\n%s", logs.String())
	}
}

// TestWatchCredsAreNarrow: the daemon's system credential follows its own space's
// connection events and asks for CONNZ, and nothing else of the system account: another
// account's events, every account's, and a KICK request are refused by the broker.
func TestWatchCredsAreNarrow(t *testing.T) {
	m := newMesh(t, 0)
	creds, err := m.Chain.WatchCreds(space)
	if err != nil {
		t.Fatal(err)
	}
	acct, err := m.Chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	nc := m.Connect(creds, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	refused := func(what string, do func() error) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatalf("%s: flush: %v", what, err)
		}
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), "Permissions Violation") {
				t.Fatalf("%s: %v, want a permissions violation", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not refused", what)
		}
	}
	if _, err := nc.SubscribeSync("$SYS.ACCOUNT." + acct.PublicKey() + ".DISCONNECT"); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"acc":"`+acct.PublicKey()+`"}`), 10*time.Second); err != nil {
		t.Fatalf("CONNZ: %v", err)
	}
	select {
	case err := <-errs:
		t.Fatalf("its own events and CONNZ: %v", err)
	default:
	}
	refused("every account's events", func() error { _, err := nc.SubscribeSync("$SYS.ACCOUNT.*.DISCONNECT"); return err })
	refused("a KICK request", func() error { return nc.Publish("$SYS.REQ.SERVER.PING.KICK", []byte(`{}`)) })
}
