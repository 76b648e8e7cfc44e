package client_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestDroppedMessagesAreNotRetained: once the application has read and dropped large
// posts, the endpoint keeps only what it needs to recognise them again (their ids), not
// their bodies. With the ids kept as slices of the decoded messages, the dedupe window
// (8 192 ids) kept every body alive: here posts × 64 KiB.
func TestDroppedMessagesAreNotRetained(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MiB through the broker")
	}
	const (
		posts = 1000
		size  = 64 << 10
	)
	url := mesh(t)
	alice := peer(t, url, client.Config{Name: "alice"})
	bob := peer(t, url, client.Config{Name: "bob"}, "general")
	body := strings.Repeat("x", size)
	before := heapInUse()
	done := make(chan error, 1)
	go func() {
		for range posts {
			if _, err := alice.Post(t.Context(), "general", client.Draft{Parts: []protocol.Part{protocol.TextPart(body)}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range posts {
		if in := next(t, bob); len(in.Text()) != size {
			t.Fatalf("post %d: %d bytes, want %d", i, len(in.Text()), size)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := heapInUse()
	grown := int64(after) - int64(before)
	const limit = 16 << 20 // a quarter of what the bodies take
	t.Logf("heap grew %.1f MiB after %d posts of %d KiB were read and dropped (%.0f bytes a post)",
		float64(grown)/(1<<20), posts, size>>10, float64(grown)/posts)
	if grown > limit {
		t.Fatalf("the endpoint retains %.1f MiB after the application dropped %d posts of %d KiB: want < %d MiB",
			float64(grown)/(1<<20), posts, size>>10, limit>>20)
	}
	runtime.KeepAlive(alice)
	runtime.KeepAlive(bob)
}
