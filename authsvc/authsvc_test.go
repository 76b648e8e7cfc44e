package authsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// deadline guards every wait against a hang; nothing waits for it to pass.
const deadline = 10 * time.Second

const (
	testSpace = "team"
	testIdP   = "https://idp.test"
)

// fakeIdP accepts "idtok" as (testIdP, "alice-sub") and refuses anything else.
type fakeIdP struct{}

func (fakeIdP) VerifyIDToken(_ context.Context, raw string) (string, string, error) {
	if raw != "idtok" {
		return "", "", errors.New("unknown id token")
	}
	return testIdP, "alice-sub", nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// laneFixture is a running lane of testSpace on a real broker in operator mode, with
// alice granted on channel general.
type laneFixture struct {
	*meshtest.Mesh
	ua         *trust.UserAuth
	kv         jetstream.KeyValue
	dir        string
	statusPath string
	lane       *Lane
	cancel     context.CancelFunc
	done       chan error
	stopOnce   sync.Once
	stopErr    error
}

// ended waits up to within for the lane to end by itself; when it did, it also returns
// what Run returned (stop returns the same afterwards).
func (f *laneFixture) ended(within time.Duration) (bool, error) {
	select {
	case err := <-f.done:
		f.stopOnce.Do(func() { f.stopErr = err })
		return true, err
	case <-time.After(within):
		return false, nil
	}
}

// stop ends the lane and returns what Run returned; later calls return the same.
func (f *laneFixture) stop(t *testing.T) error {
	f.stopOnce.Do(func() {
		f.cancel()
		select {
		case f.stopErr = <-f.done:
		case <-time.After(deadline):
			t.Error("lane did not stop")
		}
	})
	return f.stopErr
}

// provisionSpace provisions space on mesh m as its provisioner, grants alice (subject
// alice-sub) on channel general, and returns the ledger bucket.
func provisionSpace(t *testing.T, m *meshtest.Mesh, space string) jetstream.KeyValue {
	t.Helper()
	kv := meshtest.AuthBucket(t, m.Provision(space, provision.Options{}), space)
	if _, err := ledger.Grant(t.Context(), kv, ledger.Row{
		Actor: "alice", Subjects: []string{"alice-sub"},
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"},
	}); err != nil {
		t.Fatal(err)
	}
	return kv
}

// startLane provisions testSpace, grants alice, writes a stale status file and runs a
// lane until it is ready.
func startLane(t *testing.T) *laneFixture {
	t.Helper()
	return startLaneLimits(t, nil)
}

// startLaneLimits is startLane on a space whose account has the limits lim (nil: the
// defaults).
func startLaneLimits(t *testing.T, lim *trust.Limits) *laneFixture {
	t.Helper()
	f := &laneFixture{done: make(chan error, 1)}
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if lim != nil {
		if _, _, err := chain.SetLimits(testSpace, *lim); err != nil {
			t.Fatal(err)
		}
	}
	if f.ua, err = chain.UserAuth(testSpace); err != nil {
		t.Fatal(err)
	}
	f.Mesh = meshtest.Serve(t, chain)
	f.kv = provisionSpace(t, f.Mesh, testSpace)
	f.dir = StateDir(f.Chain.Dir(), testSpace)
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f.statusPath = filepath.Join(f.dir, StatusFile)
	if err := os.WriteFile(f.statusPath, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	lane := &Lane{
		Space: testSpace, Server: f.URL, Chain: f.Chain, IdP: fakeIdP{}, IdPIssuer: testIdP,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	f.lane = lane
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	t.Cleanup(func() { _ = f.stop(t) })
	ready := make(chan struct{})
	go func() { f.done <- lane.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-f.done:
		t.Fatalf("lane: %v", err)
	case <-time.After(deadline):
		t.Fatal("lane not ready")
	}
	return f
}

// TestLane: a granted human exchanges an ID token for a bearer, connects with the
// sentinel creds and the bearer, and posts on its channel; a bad bearer is refused; after
// a revoke the same bearer is refused at the next connect; auth-service.json exists only
// while the lane is ready.
func TestLane(t *testing.T) {
	f := startLane(t)
	ua, url, kv, dir, statusPath := f.ua, f.URL, f.kv, f.dir, f.statusPath

	st, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(statusPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("status file: %v, mode %v", err, fi.Mode())
	}
	if st.Ver != 1 || st.Space != testSpace || st.PID != os.Getpid() || st.Issuer != "urn:cotal:auth:"+testSpace || st.Cap == "" {
		t.Fatalf("status: %+v", st)
	}
	// The sentinel is a standard creds file beside it (the reference's sentinel.creds).
	sentinelPath := filepath.Join(dir, SentinelFile)
	want, _ := trust.ReadCreds(ua.SentinelCreds())
	if b, err := os.ReadFile(sentinelPath); err != nil {
		t.Fatal(err)
	} else if got, err := trust.ReadCreds(b); err != nil || got.Seed != want.Seed || got.Name != "sentinel" {
		t.Fatalf("sentinel creds file: %+v %v", got, err)
	}
	if fi, err := os.Stat(sentinelPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("sentinel creds file: %v, mode %v", err, fi.Mode())
	}

	// Exchange the ID token for a bearer.
	body, _ := json.Marshal(exchangewire.Request{IDPToken: "idtok", Actor: "alice"})
	hreq, err := http.NewRequestWithContext(t.Context(), http.MethodPost, st.URL+"/exchange", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Authorization", "Bearer "+st.Cap)
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	var xr exchangewire.Response
	err = json.NewDecoder(hresp.Body).Decode(&xr)
	hresp.Body.Close()
	if err != nil || hresp.StatusCode != http.StatusOK || xr.Token == "" {
		t.Fatalf("exchange: status %d, %v, %+v", hresp.StatusCode, err, xr)
	}

	sentinel, err := trust.ReadCreds(ua.SentinelCreds())
	if err != nil {
		t.Fatal(err)
	}
	asyncErrs := make(chan error, 8)
	dial := func(token string) (*nats.Conn, error) {
		ibx := userauth.NewInboxName()
		return nats.Connect(url, nats.UserJWTAndSeed(sentinel.JWT, sentinel.Seed), nats.Token(token),
			nats.Name(ibx), nats.CustomInboxPrefix(userauth.InboxPrefix(ibx)), nats.Timeout(deadline), nats.NoReconnect(),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { asyncErrs <- err }))
	}

	// A granted actor connects and posts on its channel, with a JetStream ack on its inbox.
	nc, err := dial(xr.Token)
	if err != nil {
		t.Fatalf("granted actor refused: %v", err)
	}
	defer nc.Close()
	me := protocol.Principal{Owner: xr.Owner, Actor: xr.Actor}
	sub, err := nc.SubscribeSync(protocol.ChannelFilter(testSpace, "general"))
	if err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(t.Context(), deadline)
	defer pcancel()
	if _, err := ajs.Publish(pctx, protocol.ChatSubject(testSpace, me, "general"), []byte("hi")); err != nil {
		t.Fatalf("post: %v", err)
	}
	if m, err := sub.NextMsg(deadline); err != nil || string(m.Data) != "hi" {
		t.Fatalf("own post not seen: %v", err)
	}
	if err := nc.Publish(protocol.ChatSubject(testSpace, protocol.Principal{Owner: xr.Owner, Actor: "bob"}, "general"), []byte("forged")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asyncErrs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("forged post: %v, want a permissions violation", err)
		}
	case <-time.After(deadline):
		t.Fatal("a post with another sender token was not refused")
	}

	if _, err := dial("not-a-bearer"); err == nil {
		t.Fatal("a bad bearer was admitted")
	}

	// Revoked: refused at the next connect.
	if _, err := ledger.Revoke(t.Context(), kv, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if c, err := dial(xr.Token); err == nil {
		c.Close()
		t.Fatal("a revoked actor was admitted")
	}

	if err := f.stop(t); err != nil {
		t.Fatalf("lane: %v", err)
	}
	if _, err := os.Stat(statusPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("status file after stop: %v", err)
	}
}
