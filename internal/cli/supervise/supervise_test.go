package supervise

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/workspace"
)

const space = "main"

// syncBuffer is a bytes.Buffer safe to read while the manager writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// options are supervise's options on an open broker provisioned with space, in a new
// project; env is its environment.
func options(t *testing.T, env map[string]string) (*Options, *syncBuffer, *syncBuffer, *nats.Conn) {
	t.Helper()
	url := brokertest.Start(t).ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	proj, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	ios, _, _, _ := iostreams.Test()
	ios.Out, ios.ErrOut = out, errOut
	return &Options{IO: ios,
		Resolve: func(cmdutil.MeshFlags) (cmdutil.Target, error) {
			return cmdutil.Target{Server: url, Space: space, Project: proj}, nil
		},
		Connect: func(ctx context.Context, tg cmdutil.Target, cfg client.Config, _ cmdutil.As) (*client.Endpoint, error) {
			cfg.Space = tg.Space
			return client.Connect(ctx, tg.Server, cfg)
		},
		Getenv:     func(k string) string { return env[k] },
		Executable: os.Executable,
		DaemonLog:  func() slog.Handler { return slog.NewTextHandler(errOut, nil) },
	}, out, errOut, nc
}

// TestSuperviseServesAndStops: supervise serves the space's manager (ps answers), says
// so once, and on cancel stops and says its lease is released.
func TestSuperviseServesAndStops(t *testing.T) {
	opts, out, errOut, nc := options(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runSupervise(ctx, opts) }()
	meshtest.Until(t, "the manager up line", 20*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("supervise: %v (stderr %s)", err, errOut.String())
		default:
		}
		return strings.Contains(out.String(), "✓ manager up (space main)")
	})
	c := &mgrclient.Client{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, Operator: true}
	var ps protocol.PsResult
	if err := c.Call(t.Context(), protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil || len(ps.Seats) != 0 {
		t.Fatalf("ps: %+v %v", ps, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("supervise: %v", err)
	}
	if !strings.Contains(errOut.String(), "manager of space main stopped; its seats are stopped and its lease released") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

// TestSuperviseRefuses: a bad spawn window and a mesh outside a project are refused with
// what to do, before anything connects.
func TestSuperviseRefuses(t *testing.T) {
	opts, out, _, _ := options(t, map[string]string{WindowEnv: "-3s"})
	err := runSupervise(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "$"+WindowEnv+" -3s") || !strings.Contains(err.Error(), "export "+WindowEnv+"=30s") {
		t.Fatalf("bad window: %v", err)
	}
	opts, _, _, _ = options(t, nil)
	opts.Resolve = func(cmdutil.MeshFlags) (cmdutil.Target, error) {
		return cmdutil.Target{Server: "nats://127.0.0.1:1", Space: space}, nil
	}
	dir := t.TempDir()
	opts.Getwd = func() (string, error) { return dir, nil }
	want := "next: run `mkdir -p " + filepath.Join(dir, "cotal-project") + " && cd " + filepath.Join(dir, "cotal-project") + " && cotal setup --yes`"
	if err := runSupervise(t.Context(), opts); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("outside a project: %v", err)
	}
	if out.String() != "" {
		t.Fatalf("a refused supervise printed %q", out.String())
	}
}

// TestUnsupported: the manager refuses Windows, whose seats would have no terminal, with
// the command that runs an agent without it; Linux and macOS run it.
func TestUnsupported(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		if err := Unsupported(goos); err != nil {
			t.Errorf("%s: %v", goos, err)
		}
	}
	err := Unsupported("windows")
	if err == nil || !strings.Contains(err.Error(), "refusing cotal supervise on windows: the agent manager runs each seat on a pseudo-terminal") || !strings.Contains(err.Error(), "cotal spawn") {
		t.Fatalf("windows: %v", err)
	}
}
