package spacehost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// gatedLanes are lanes that count how many are opening (in Run, not yet serving) and
// serve once handed a token on serve; with serve nil they never serve.
type gatedLanes struct {
	mu      sync.Mutex
	opening int // in Run and not serving
	most    int // the most opening at once
	entered int // Runs started
	serve   chan struct{}
}

func (g *gatedLanes) Run(ctx context.Context, ready func()) error {
	g.mu.Lock()
	g.opening++
	g.entered++
	g.most = max(g.most, g.opening)
	g.mu.Unlock()
	select {
	case <-g.serve:
	case <-ctx.Done():
		return nil
	}
	g.mu.Lock()
	g.opening--
	g.mu.Unlock()
	ready()
	<-ctx.Done()
	return nil
}

func (g *gatedLanes) counts() (opening, most, entered int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opening, g.most, g.entered
}

// startGated runs a host of n spaces whose lanes are g, and stops it at the test's end.
func startGated(t *testing.T, g *gatedLanes, n, maxOpening int, hold time.Duration) chan Ready {
	t.Helper()
	spaces := make([]string, n)
	for i := range spaces {
		spaces[i] = fmt.Sprintf("s%02d", i)
	}
	data, err := json.Marshal(map[string]any{"version": 1, "spaces": spaces})
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "spaces.json")
	if err := atomicfile.WriteFile(manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := &Host{Manifest: manifest, MaxOpening: maxOpening, OpenHold: hold,
		NewLane: func(Entry, *slog.Logger) (Lane, error) { return g, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Ready, 1)
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx, func(r Ready) { ready <- r }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(waitFor):
			t.Error("host did not stop")
		}
	})
	return ready
}

// A host opens at most MaxOpening lanes at once, the next as soon as one serves, so a
// host of thousands of spaces does not dial thousands of broker connections in the same
// instant (their handshakes outlasted the connect timeout on a busy broker).
func TestLanesOpenAFewAtATime(t *testing.T) {
	const n, maxOpening = 12, 3
	g := &gatedLanes{serve: make(chan struct{})}
	ready := startGated(t, g, n, maxOpening, time.Hour)
	for served := range n {
		want := min(maxOpening, n-served)
		meshtest.Until(t, fmt.Sprintf("%d lanes opening", want), waitFor, func() bool {
			opening, _, _ := g.counts()
			return opening == want
		})
		g.serve <- struct{}{}
	}
	select {
	case r := <-ready:
		if len(r.Serving) != n || len(r.Retrying) != 0 {
			t.Fatalf("ready %+v, want all %d serving", r, n)
		}
	case <-time.After(waitFor):
		t.Fatal("host not ready")
	}
	if _, most, _ := g.counts(); most > maxOpening {
		t.Fatalf("%d lanes opened at once, want at most %d", most, maxOpening)
	}
}

// A lane that waits to serve (for a lease another process holds) keeps its turn only for
// OpenHold: the lanes after it open meanwhile.
func TestOpenHoldLetsTheNextLanesOpen(t *testing.T) {
	g := &gatedLanes{} // never serves
	startGated(t, g, 4, 1, 20*time.Millisecond)
	meshtest.Until(t, "every lane opening", waitFor, func() bool {
		_, _, entered := g.counts()
		return entered == 4
	})
}
