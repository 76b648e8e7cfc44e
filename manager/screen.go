package manager

import "sync"

// screen keeps the last bytes a seat's terminal printed, so a late attach repaints from
// them. It is a byte ring of fixed size.
type screen struct {
	mu   sync.Mutex
	buf  []byte
	size int
}

func newScreen(size int) *screen { return &screen{size: size} }

// Write keeps p, dropping the oldest bytes past the size.
func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if over := len(s.buf) - s.size; over > 0 {
		s.buf = append(s.buf[:0:0], s.buf[over:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (s *screen) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.buf...)
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
