package spacehost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

const waitFor = 10 * time.Second

// fakeLanes builds in-process lanes and reports what they do on events.
type fakeLanes struct {
	t      *testing.T
	mu     sync.Mutex
	fail   map[string]error         // a space whose lane fails to open, while set
	hold   map[string]chan struct{} // a space whose lane ignores ctx until the channel closes
	runs   map[string]int
	events chan string // "ready <space>", "failed <space>", "ctxdone <space>", "closed <space>"
}

func newFakeLanes(t *testing.T) *fakeLanes {
	return &fakeLanes{t: t, fail: map[string]error{}, hold: map[string]chan struct{}{}, runs: map[string]int{},
		events: make(chan string, 1024)}
}

func (f *fakeLanes) setFail(space string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, space)
	} else {
		f.fail[space] = err
	}
}

func (f *fakeLanes) setHold(space string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan struct{})
	f.hold[space] = c
	return c
}

func (f *fakeLanes) runCount(space string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[space]
}

func (f *fakeLanes) newLane(e Entry, log *slog.Logger) (Lane, error) {
	return &fakeLane{f: f, space: e.Space, log: log}, nil
}

type fakeLane struct {
	f     *fakeLanes
	space string
	log   *slog.Logger
}

func (l *fakeLane) Run(ctx context.Context, ready func()) error {
	l.f.mu.Lock()
	l.f.runs[l.space]++
	err := l.f.fail[l.space]
	hold := l.f.hold[l.space]
	l.f.mu.Unlock()
	if err != nil {
		l.f.events <- "failed " + l.space
		return fmt.Errorf("open %s: %w", l.space, err)
	}
	l.log.Info("serving")
	ready()
	l.f.events <- "ready " + l.space
	<-ctx.Done()
	l.f.events <- "ctxdone " + l.space
	if hold != nil {
		<-hold
	}
	l.f.events <- "closed " + l.space
	return nil
}

// expect waits for event want, skipping others, under a deadline.
func (f *fakeLanes) expect(want string) {
	f.t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-f.events:
			if ev == want {
				return
			}
		case <-deadline:
			f.t.Fatalf("no %q within %s", want, waitFor)
		}
	}
}

// logSink is a slog handler target: lines go to the test log and to a channel.
type logSink struct {
	t     *testing.T
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	s.t.Log(strings.TrimSpace(string(p)))
	select {
	case s.lines <- string(p):
	default:
	}
	return len(p), nil
}

func (s *logSink) expect(substr string) {
	s.t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case l := <-s.lines:
			if strings.Contains(l, substr) {
				return
			}
		case <-deadline:
			s.t.Fatalf("no log line with %q within %s", substr, waitFor)
		}
	}
}

type fixture struct {
	t        *testing.T
	lanes    *fakeLanes
	logs     *logSink
	host     *Host
	manifest string
	cancel   context.CancelFunc
	done     chan error
	ready    chan Ready
}

func newFixture(t *testing.T, manifest string, policy Policy) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{t: t, lanes: newFakeLanes(t), logs: &logSink{t: t, lines: make(chan string, 1024)},
		manifest: filepath.Join(dir, "spaces.json"), done: make(chan error, 1), ready: make(chan Ready, 1)}
	fx.write(manifest)
	fx.host = &Host{Manifest: fx.manifest, NewLane: fx.lanes.newLane, Settings: portSettings, Policy: policy,
		RetryDelay: 20 * time.Millisecond, CloseTimeout: 50 * time.Millisecond,
		Logger: slog.New(NewPrefixHandler(slog.NewTextHandler(fx.logs, nil)))}
	return fx
}

func (fx *fixture) write(manifest string) {
	fx.t.Helper()
	if err := atomicfile.WriteFile(fx.manifest, []byte(manifest), 0o644); err != nil {
		fx.t.Fatal(err)
	}
}

// rewrite replaces the manifest and asks the host to reload (the watcher notices it too).
func (fx *fixture) rewrite(manifest string) {
	fx.t.Helper()
	fx.write(manifest)
	fx.host.Reload()
}

func (fx *fixture) start() {
	ctx, cancel := context.WithCancel(context.Background())
	fx.cancel = cancel
	go func() { fx.done <- fx.host.Run(ctx, func(r Ready) { fx.ready <- r }) }()
	fx.t.Cleanup(func() {
		cancel()
		select {
		case <-fx.done:
		case <-time.After(waitFor):
			fx.t.Error("host did not stop")
		}
	})
}

func (fx *fixture) waitReady() Ready {
	fx.t.Helper()
	select {
	case r := <-fx.ready:
		return r
	case err := <-fx.done:
		fx.t.Fatalf("host stopped: %v", err)
	case <-time.After(waitFor):
		fx.t.Fatal("host not ready")
	}
	return Ready{}
}

func (fx *fixture) applied() string {
	b, err := os.ReadFile(AppliedPath(fx.manifest))
	if err != nil {
		fx.t.Fatal(err)
	}
	return string(b)
}

// waitApplied re-checks .applied until it holds the hash of manifest.
func (fx *fixture) waitApplied(manifest string) {
	fx.t.Helper()
	want := Hash([]byte(manifest)) + "\n"
	meshtest.Until(fx.t, fmt.Sprintf(".applied holding %q", want), waitFor, func() bool { return fx.applied() == want })
}

func TestServeWhatYouCan(t *testing.T) {
	const m = `{"version": 1, "spaces": ["alpha", "beta"]}`
	fx := newFixture(t, m, ServeWhatYouCan)
	fx.lanes.setFail("beta", errors.New("the delivery lease is held"))
	fx.start()
	r := fx.waitReady()
	if strings.Join(r.Serving, ",") != "alpha" || strings.Join(r.RetryingNames(), ",") != "beta" ||
		!strings.Contains(r.Retrying[0].Err.Error(), "lease is held") {
		t.Fatalf("ready %+v", r)
	}
	if got := fx.applied(); got != Hash([]byte(m))+"\n" {
		t.Fatalf(".applied %q", got)
	}
	fx.lanes.expect("failed beta") // the first attempt
	fx.lanes.expect("failed beta") // a retry
	fx.lanes.setFail("beta", nil)
	fx.lanes.expect("ready beta")
	fx.logs.expect("[beta] lane reopened")
	if !strings.Contains(fx.logs.buf.String(), "[alpha] serving") {
		t.Fatal("lane lines carry no [alpha] prefix")
	}
}

func TestAllOrNoneRefuses(t *testing.T) {
	fx := newFixture(t, `{"version": 1, "spaces": ["alpha", "beta"]}`, AllOrNone)
	fx.lanes.setFail("beta", errors.New("no state"))
	fx.start()
	select {
	case err := <-fx.done:
		if err == nil || !strings.Contains(err.Error(), "refusing to start: space beta") {
			t.Fatalf("got %v", err)
		}
		fx.done <- err // for the cleanup
	case <-fx.ready:
		t.Fatal("all-or-none host started with a failing space")
	case <-time.After(waitFor):
		t.Fatal("host neither refused nor started")
	}
	if n := fx.lanes.runCount("alpha"); n > 1 {
		t.Fatalf("alpha ran %d times: the refused startup reopened it", n)
	}
	if n := fx.lanes.runCount("beta"); n != 1 {
		t.Fatalf("beta ran %d times, want 1", n)
	}
}

func TestManifestChanges(t *testing.T) {
	m1 := `{"version": 2, "spaces": [{"space": "alpha", "exchangePublicPort": 7451}, {"space": "beta"}]}`
	fx := newFixture(t, m1, ServeWhatYouCan)
	fx.start()
	if r := fx.waitReady(); len(r.Serving) != 2 || len(r.Retrying) != 0 {
		t.Fatalf("ready %+v", r)
	}
	// alpha changes, beta goes, gamma comes.
	m2 := `{"version": 2, "spaces": [{"space": "alpha", "exchangePublicPort": 7452}, {"space": "gamma"}]}`
	fx.rewrite(m2)
	fx.lanes.expect("closed beta")
	fx.waitApplied(m2)
	meshtest.Until(t, "alpha run twice and gamma once", waitFor, func() bool {
		return fx.lanes.runCount("alpha") >= 2 && fx.lanes.runCount("gamma") >= 1
	})
	if n := fx.lanes.runCount("beta"); n != 1 {
		t.Fatalf("beta ran %d times after its removal", n)
	}
	// A bad manifest is ignored; the lanes stay.
	fx.rewrite(`{"version": 2, "spaces": [{"space": "alpha", "bogus": 1}]}`)
	fx.logs.expect("manifest ignored")
	if fx.applied() != Hash([]byte(m2))+"\n" {
		t.Fatal(".applied changed for a bad manifest")
	}
	// The watcher alone notices a change.
	m3 := `{"version": 2, "spaces": [{"space": "alpha", "exchangePublicPort": 7452}]}`
	fx.write(m3)
	fx.lanes.expect("closed gamma")
	fx.waitApplied(m3)
}

func TestAppliedWaitsForClose(t *testing.T) {
	m1 := `{"version": 1, "spaces": ["alpha", "beta"]}`
	fx := newFixture(t, m1, ServeWhatYouCan)
	release := fx.lanes.setHold("beta")
	fx.start()
	fx.waitReady()
	m2 := `{"version": 1, "spaces": ["alpha"]}`
	fx.rewrite(m2)
	fx.lanes.expect("ctxdone beta")
	// beta ignores ctx past CloseTimeout: the acknowledgment is held back.
	fx.logs.expect("[beta] lane has not confirmed its close")
	if got := fx.applied(); got != Hash([]byte(m1))+"\n" {
		t.Fatalf(".applied is %q before beta's lane returned", got)
	}
	// Named again meanwhile, beta is not opened again while its lane has not returned.
	fx.rewrite(m1)
	fx.logs.expect("[beta] space waits for its previous lane to close")
	if n := fx.lanes.runCount("beta"); n != 1 {
		t.Fatalf("beta opened again (%d runs) before its lane returned", n)
	}
	fx.rewrite(m2)
	fx.logs.expect("manifest changed")
	close(release)
	fx.lanes.expect("closed beta")
	fx.waitApplied(m2)
	if n := fx.lanes.runCount("beta"); n != 1 {
		t.Fatalf("beta ran %d times", n)
	}
}

func TestReopenAfterHeldClose(t *testing.T) {
	m1 := `{"version": 1, "spaces": ["alpha", "beta"]}`
	fx := newFixture(t, m1, ServeWhatYouCan)
	release := fx.lanes.setHold("beta")
	fx.start()
	fx.waitReady()
	fx.rewrite(`{"version": 1, "spaces": ["alpha"]}`)
	fx.lanes.expect("ctxdone beta")
	fx.rewrite(m1)
	fx.logs.expect("[beta] space waits for its previous lane to close")
	fx.lanes.mu.Lock()
	delete(fx.lanes.hold, "beta")
	fx.lanes.mu.Unlock()
	close(release)
	fx.lanes.expect("closed beta")
	fx.lanes.expect("ready beta")
	fx.waitApplied(m1)
}

func TestUnwritableFolderRefuses(t *testing.T) {
	fx := newFixture(t, `{"version": 1, "spaces": ["alpha"]}`, ServeWhatYouCan)
	// A folder where .applied should be is unwritable for root too.
	if err := os.Mkdir(AppliedPath(fx.manifest), 0o755); err != nil {
		t.Fatal(err)
	}
	err := fx.host.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "folder "+filepath.Dir(fx.manifest)+" must be writable") {
		t.Fatalf("got %v", err)
	}
	if n := fx.lanes.runCount("alpha"); n != 0 {
		t.Fatalf("alpha ran %d times", n)
	}
	if os.Geteuid() != 0 {
		fx2 := newFixture(t, `{"version": 1, "spaces": ["alpha"]}`, ServeWhatYouCan)
		dir := filepath.Dir(fx2.manifest)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		if err := fx2.host.Run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("got %v", err)
		}
	}
}

func TestBadManifestRefusesStart(t *testing.T) {
	fx := newFixture(t, `{"version": 1, "spaces": ["alpha", "alpha"]}`, ServeWhatYouCan)
	err := fx.host.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(AppliedPath(fx.manifest)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".applied written for a refused manifest: %v", err)
	}
}

func TestFatalStopsHost(t *testing.T) {
	fx := newFixture(t, `{"version": 1, "spaces": ["alpha", "beta"]}`, ServeWhatYouCan)
	gone := errors.New("broker connection unavailable")
	fx.host.Fatal = func(err error) bool { return errors.Is(err, gone) }
	fx.lanes.setFail("beta", gone)
	fx.start()
	select {
	case err := <-fx.done:
		if !errors.Is(err, gone) {
			t.Fatalf("got %v", err)
		}
		fx.done <- err
	case <-time.After(waitFor):
		t.Fatal("host did not stop")
	}
}
