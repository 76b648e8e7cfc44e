package manager

import "sync"

// screen keeps the last bytes a seat's terminal printed, so a late attach repaints from
// them. It is a byte ring of fixed size: a write copies only its own bytes (at most the
// size) and never moves what is kept.
type screen struct {
	mu   sync.Mutex
	buf  []byte // allocated at the first write, size long
	size int
	head int // where the next byte goes
	full bool
}

func newScreen(size int) *screen { return &screen{size: size} }

// Write keeps p, dropping the oldest bytes past the size.
func (s *screen) Write(p []byte) (int, error) {
	n := len(p)
	if s.size <= 0 {
		return n, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		s.buf = make([]byte, s.size)
	}
	if len(p) >= s.size { // only its last size bytes stay
		copy(s.buf, p[len(p)-s.size:])
		s.head, s.full = 0, true
		return n, nil
	}
	c := copy(s.buf[s.head:], p)
	if c < len(p) {
		copy(s.buf, p[c:])
		s.full = true
	}
	if s.head+len(p) >= s.size {
		s.full = true
	}
	s.head = (s.head + len(p)) % s.size
	return n, nil
}

// Bytes returns a copy of what is kept, oldest first.
func (s *screen) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]byte(nil), s.buf[:s.head]...)
	}
	out := make([]byte, 0, s.size)
	out = append(out, s.buf[s.head:]...)
	return append(out, s.buf[:s.head]...)
}

// Tail returns the last n lines kept, as text.
func (s *screen) Tail(n int) string {
	b := s.Bytes()
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	i := end
	for lines := 0; i > 0; i-- {
		if b[i-1] == '\n' {
			lines++
			if lines == n {
				break
			}
		}
	}
	return string(b[i:end])
}
