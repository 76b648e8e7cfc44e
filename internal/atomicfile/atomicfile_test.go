package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	steps := []struct {
		data string
		perm os.FileMode
	}{
		{"first\n", 0o600},
		{"second, longer than the first\n", 0o600},
		{"x", 0o640}, // shorter: no tail of the old content survives; mode is set exactly
		{"", 0o600},
	}
	for i, s := range steps {
		if err := WriteFile(path, []byte(s.data), s.perm); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != s.data {
			t.Fatalf("step %d: content %q, want %q", i, got, s.data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != s.perm {
			t.Fatalf("step %d: mode %v, want %v", i, fi.Mode().Perm(), s.perm)
		}
		if n := names(t, dir); len(n) != 1 || n[0] != "f.json" {
			t.Fatalf("step %d: folder holds %q, want only f.json", i, n)
		}
	}
}

func TestWriteFileFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "child"), 0o700); err != nil {
		t.Fatal(err)
	} // a non-empty directory cannot be renamed over
	tests := []struct{ name, path string }{
		{"rename over a directory", target},
		{"missing folder", filepath.Join(dir, "missing", "f")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := WriteFile(tt.path, []byte("data"), 0o600); err == nil {
				t.Fatal("want an error")
			}
			if n := names(t, dir); len(n) != 1 || n[0] != "target" {
				t.Fatalf("folder holds %q, want only target", n)
			}
			if n := names(t, target); len(n) != 1 || n[0] != "child" {
				t.Fatalf("target holds %q, want only child", n)
			}
		})
	}
}
