package iostreams

import (
	"os"
	"testing"
)

// TestDevNullIsNoTerminal: input from /dev/null (a character device) is not a terminal,
// so a command reading it refuses to prompt instead of taking EOF for "no".
func TestDevNullIsNoTerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Skipf("no %s: %v", os.DevNull, err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatalf("%s counted as a terminal", os.DevNull)
	}
}
