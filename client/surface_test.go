package client

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// Two sources carrying the same posts in the same order (a channel's live copies and its
// hand-off copies) surface each post once and never out of order, however the two
// goroutines interleave.
func TestSurfaceFirstKeepsOrderAcrossSources(t *testing.T) {
	const posts = 5000
	e := &Endpoint{seen: newDedupe(8192), inbox: make(chan *Incoming, 4), ctx: t.Context()}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range posts {
				e.surfaceFirst(&Incoming{Message: protocol.Message{ID: fmt.Sprintf("m%05d", i)}})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	next := 0
	for next < posts {
		in := <-e.inbox
		if want := fmt.Sprintf("m%05d", next); in.ID != want {
			t.Fatalf("surfaced %s where %s comes next", in.ID, want)
		}
		next++
	}
	<-done
	if len(e.inbox) != 0 {
		t.Fatalf("%d duplicates surfaced", len(e.inbox))
	}
}
