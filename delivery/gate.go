package delivery

import (
	"context"
	"sync"
)

// gate says whether the lane serves; workers wait on it.
type gate struct {
	mu     sync.Mutex
	open   bool
	opened chan struct{} // closed while open
	shut   chan struct{} // closed while shut
}

func newGate() *gate {
	g := &gate{opened: make(chan struct{}), shut: make(chan struct{})}
	close(g.shut)
	return g
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == open {
		return
	}
	g.open = open
	if open {
		close(g.opened)
		g.shut = make(chan struct{})
	} else {
		close(g.shut)
		g.opened = make(chan struct{})
	}
}

func (g *gate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// wait blocks until the gate is open or ctx ends.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.opened
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closed is closed once the gate shuts (after the call).
func (g *gate) closed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shut
}
