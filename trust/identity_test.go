package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

func TestReadCredsRoundTrip(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	uid := protocol.NewLifecycleUID()
	b, err := a.Mint(UserSpec{Name: "alice", Profile: ProfileAgent, Principal: protocol.Principal{Owner: "local", Actor: "Alice_1"},
		LifecycleUID: uid, Role: "reviewer", AllowSubscribe: []string{"general"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCreds(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Principal.String() != "local.Alice_1" || got.LifecycleUID != uid || got.Role != "reviewer" || got.Profile != ProfileAgent ||
		!got.Expires.IsZero() || !strings.HasPrefix(got.InboxPrefix, "_INBOX_U") {
		t.Fatalf("read back %+v", got)
	}
	if _, err := ReadCreds([]byte("not creds")); err == nil {
		t.Fatal("garbage parsed as creds")
	}
}
