package bearer

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFileStore: keys are paths inside the folder, created once (0600) and never replaced;
// a key leaving the folder is refused; Within prefixes keys.
func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	st := Within(FileStore{Dir: dir}, "space.74")
	if _, err := st.Get("issuer.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if err := st.Create("issuer.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := st.Create("issuer.json", []byte("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want fs.ErrExist", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "space.74", "issuer.json"))
	if err != nil || !bytes.Equal(b, []byte("one")) {
		t.Fatalf("stored %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "space.74", "issuer.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
	for _, k := range []string{"", "../x", "/etc/passwd", "a/../../x"} {
		if err := (FileStore{Dir: dir}).Create(k, []byte("x")); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
	// What is stored is never replaced, even when it does not decode.
	if _, err := LoadFrom(st, "team"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("issuer over a corrupt value: %v, want ErrCorrupt", err)
	}
	// Through a store, the issuer lands where Load(dir) reads it.
	a, err := LoadFrom(Within(FileStore{Dir: dir}, "space.75"), "u")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := Load(filepath.Join(dir, "space.75"), "u")
	if err != nil || a.KeyID() != b2.KeyID() {
		t.Fatalf("Load after LoadFrom: kid %q vs %q, %v", a.KeyID(), b2.KeyID(), err)
	}
}
