package lang

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// gatedEffects holds the first turn open until the test releases it, and
// counts turns in flight at once.
type gatedEffects struct {
	*fakeEffects
	entered  chan string
	gate     chan struct{}
	inFlight atomic.Int32
	overlap  atomic.Bool
}

func (g *gatedEffects) Perform(ctx context.Context, c Call) (Result, error) {
	if c.Kind != "turn" {
		return g.fakeEffects.Perform(ctx, c)
	}
	if g.inFlight.Add(1) > 1 {
		g.overlap.Store(true)
	}
	defer g.inFlight.Add(-1)
	g.entered <- c.Key
	<-g.gate
	return Result{Value: map[string]any{"status": "done", "at": 1.0}}, nil
}

// TestTurnsOnOneAgentAreSerialized: two branches turning the same agent never
// have two turns in flight; the second begins when the first settles.
func TestTurnsOnOneAgentAreSerialized(t *testing.T) {
	g := &gatedEffects{fakeEffects: newFake(), entered: make(chan string, 2), gate: make(chan struct{})}
	prog := mustCompile(t, `const a = await spawn("a")
await parallel({
  one: () => turn(a, { name: "one" }),
  two: () => turn(a, { name: "two" }),
})`)
	done := make(chan error, 1)
	go func() { done <- prog.Run(context.Background(), Options{RunID: "r", Effects: g}) }()
	first := <-g.entered
	// The other branch is live and reaches its turn at once; give it a
	// bounded window to (wrongly) enter while the first turn is open.
	select {
	case second := <-g.entered:
		t.Fatalf("turn %s began while %s was still open", second, first)
	case <-time.After(300 * time.Millisecond):
	}
	close(g.gate)
	<-g.entered
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.overlap.Load() {
		t.Fatal("two turns on one agent were in flight at once")
	}
}
