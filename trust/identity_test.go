package trust

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

func TestIdentityIsStable(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	uid, err := c.Identity("main", "alice")
	if err != nil || !protocol.ValidLifecycleUID(uid) {
		t.Fatalf("uid %q, %v", uid, err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Identity("main", "alice"); err != nil || got != uid {
		t.Fatalf("second open gave %q, %v; want %q", got, err, uid)
	}
	if other, _ := c.Identity("other", "alice"); other == uid {
		t.Fatal("two spaces share an identity")
	}
	if _, err := c.Identity("main", "bob-x"); err == nil {
		t.Fatal("a dashed actor got an identity")
	}
	path := filepath.Join(dir, "space.6d61696e", "agents", "alice.json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v %v", fi, err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Identity("main", "alice"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt identity: %v", err)
	}
}
