package up

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/workspace"
)

// TestDaemonsWaitOwnsWatch: wait returns only once the mesh watch has returned, so no
// start the watch makes can add to the wait group after wait began with nothing counted.
// The watch is held inside its loop (in serves) when ctx ends and wait starts; wait must
// not return before the watch is let go.
func TestDaemonsWaitOwnsWatch(t *testing.T) {
	dir := t.TempDir()
	proj := &workspace.Project{Root: dir}
	if err := os.MkdirAll(proj.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := proj.WriteMesh(&workspace.Mesh{Server: "nats://127.0.0.1:4222", Mode: workspace.ModeAuth,
		Spaces: []string{"extra"}, StoreDir: dir, Root: dir, Started: testclock.Epoch(t)}); err != nil {
		t.Fatal(err)
	}
	inServes, release := make(chan struct{}), make(chan struct{})
	var released atomic.Bool
	kind := daemonKind{Daemon: workspace.Daemon{Title: "test daemon"}, proj: proj,
		serves: func(string) bool {
			close(inServes)
			<-release
			return false // starts nothing
		},
	}
	d := &daemons{kind: kind, proj: proj, running: map[string]bool{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(t.Context())
	d.startWatch(ctx)
	<-inServes // the watch runs, inside its loop
	cancel()
	waited := make(chan struct{})
	go func() {
		// Let the watch go once wait returned, or after a moment: never the cause of a
		// failure, only of the watch's end.
		select {
		case <-waited:
		case <-time.After(200 * time.Millisecond):
		}
		released.Store(true)
		close(release)
	}()
	d.wait()
	close(waited)
	if !released.Load() {
		t.Fatal("wait returned while the mesh watch still ran")
	}
}
