package manager

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// copyScreen is the screen as it was before the ring: every write past the size copies
// everything kept. It is the baseline of BenchmarkScreenWrite and the model of
// TestScreenRing.
type copyScreen struct {
	mu   sync.Mutex
	buf  []byte
	size int
}

func (s *copyScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if over := len(s.buf) - s.size; over > 0 {
		s.buf = append(s.buf[:0:0], s.buf[over:]...)
	}
	return len(p), nil
}

// TestScreenRing: after any sequence of writes the ring keeps exactly the last size bytes
// written, as the copying screen did.
func TestScreenRing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 7, 64, 4096} {
		ring, model := newScreen(size), &copyScreen{size: size}
		for i := range 2000 {
			p := make([]byte, r.IntN(3*size+2))
			for j := range p {
				p[j] = byte('a' + (i+j)%26)
			}
			if n, err := ring.Write(p); n != len(p) || err != nil {
				t.Fatalf("write %d: %d %v", len(p), n, err)
			}
			_, _ = model.Write(p)
			if got := ring.Bytes(); !bytes.Equal(got, model.buf) {
				t.Fatalf("size %d after write %d (%d bytes): ring keeps %q, want %q", size, i, len(p), got, model.buf)
			}
		}
	}
	s := newScreen(32)
	_, _ = s.Write([]byte("one\ntwo\nthree\nfour\r\n"))
	if got := s.Tail(2); got != "three\nfour" {
		t.Fatalf("tail %q", got)
	}
}

// TestScreenWriteAllocatesNothing: once full, a write copies its own bytes into the ring
// and allocates nothing (the copying screen made a new 256 KiB buffer every time).
func TestScreenWriteAllocatesNothing(t *testing.T) {
	s := newScreen(screenSize)
	chunk := bytes.Repeat([]byte("x"), 4<<10)
	for range screenSize / len(chunk) * 2 {
		_, _ = s.Write(chunk)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.Write(chunk) }); n != 0 {
		t.Fatalf("a write to a full screen allocates %v times", n)
	}
}

// BenchmarkScreenWrite compares a 4 KiB write to a full 256 KiB screen: the ring against
// the copying baseline, in the same run. Compare the ns/op of the two.
func BenchmarkScreenWrite(b *testing.B) {
	chunk := bytes.Repeat([]byte("x"), 4<<10)
	for _, c := range []struct {
		name string
		w    interface{ Write([]byte) (int, error) }
	}{{"copy", &copyScreen{size: screenSize}}, {"ring", newScreen(screenSize)}} {
		b.Run(c.name, func(b *testing.B) {
			for range screenSize / len(chunk) * 2 {
				_, _ = c.w.Write(chunk)
			}
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = c.w.Write(chunk)
			}
		})
	}
}
