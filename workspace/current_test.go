package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCurrentSpace: the default space is written 0600 as the name and a newline, read
// back, cleared; a file holding no space name is an error naming the fix.
func TestCurrentSpace(t *testing.T) {
	home := filepath.Join(t.TempDir(), ".cotal")
	if s, err := ReadCurrentSpace(home); err != nil || s != "" {
		t.Fatalf("nothing recorded: %q %v", s, err)
	}
	if err := WriteCurrentSpace(home, "review"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, CurrentMeshFile)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "review\n" {
		t.Fatalf("file %q %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi, err)
	}
	if s, err := ReadCurrentSpace(home); err != nil || s != "review" {
		t.Fatalf("read %q %v", s, err)
	}
	if err := WriteCurrentSpace(home, "a.b"); err == nil {
		t.Fatal("invalid space written")
	}
	for _, bad := range []string{"a.b\n", strings.Repeat("x", 2000)} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadCurrentSpace(home); err == nil || !strings.Contains(err.Error(), "cotal use --clear") {
			t.Fatalf("bad file %q: %v", bad, err)
		}
	}
	if err := ClearCurrentSpace(home); err != nil {
		t.Fatal(err)
	}
	if err := ClearCurrentSpace(home); err != nil {
		t.Fatalf("clear twice: %v", err)
	}
	if s, err := ReadCurrentSpace(home); err != nil || s != "" {
		t.Fatalf("after clear: %q %v", s, err)
	}
}
