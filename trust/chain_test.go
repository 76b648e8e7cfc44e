package trust

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

func TestOpenTwiceKeepsEveryKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".cotal", "auth")
	c1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := c1.Space("prod")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Space("dev"); err != nil {
		t.Fatal(err)
	}
	jwts1, err := c1.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}

	c2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c2.OperatorJWT() != c1.OperatorJWT() || c2.OperatorPublicKey() != c1.OperatorPublicKey() || c2.SystemAccount() != c1.SystemAccount() {
		t.Fatal("reopening re-keyed the operator or the system account")
	}
	spaces, err := c2.Spaces()
	if err != nil || !slices.Equal(spaces, []string{"dev", "prod"}) {
		t.Fatalf("Spaces() = %v, %v; want [dev prod]", spaces, err)
	}
	jwts2, err := c2.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jwts2) != 3 || !maps.Equal(jwts1, jwts2) {
		t.Fatalf("account JWTs changed on reopen:\n%v\n%v", jwts1, jwts2)
	}
	a2, err := c2.Space("prod")
	if err != nil {
		t.Fatal(err)
	}
	if a2.PublicKey() != a1.PublicKey() || a2.SigningKey() != a1.SigningKey() || a2.JWT() != a1.JWT() {
		t.Fatal("reopening re-keyed space prod")
	}

	ac, err := jwt.DecodeAccountClaims(a1.JWT())
	if err != nil {
		t.Fatal(err)
	}
	js := ac.Limits.JetStreamLimits
	def := DefaultLimits()
	if ac.Name != "prod" || js.DiskStorage != def.Storage || js.MemoryStorage != def.Memory || js.Streams != def.Streams || js.Consumer != def.Consumers {
		t.Fatalf("account claims: name %q, jetstream %+v; want prod with JetStream within the default limits", ac.Name, js)
	}
	sc, err := jwt.DecodeAccountClaims(jwts1[c1.SystemAccount()])
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != SystemAccountName || sc.Limits.IsJSEnabled() {
		t.Fatalf("system account: name %q, JetStream %v; want SYS without JetStream", sc.Name, sc.Limits.IsJSEnabled())
	}

	if runtime.GOOS == "windows" {
		return // no POSIX modes
	}
	for path, want := range map[string]os.FileMode{
		dir:                               0o700,
		filepath.Dir(dir):                 0o700,
		filepath.Join(dir, "broker.json"): 0o600,
		filepath.Join(dir, "account.70726f64.json"): 0o600,
		filepath.Join(dir, "account.646576.json"):   0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", path, got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("trust folder holds %d entries, want broker.json and two accounts (no temp files)", len(entries))
	}
}

func TestOpenTightensFolderMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX modes")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode after Open: %v, %v; want 0700", fi.Mode().Perm(), err)
	}
}

func TestConcurrentSpaceCreatesOneAccount(t *testing.T) {
	dir := t.TempDir()
	c1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Open(dir) // a second process on the same folder
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	keys := make([]string, 8)
	errs := make([]error, 8)
	for i := range keys {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		wg.Go(func() {
			a, err := c.Space("race")
			errs[i] = err
			if err == nil {
				keys[i] = a.PublicKey()
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Fatalf("call %d: key %s, err %v; want every call to get %s", i, keys[i], errs[i], keys[0])
		}
	}
}

func TestCorruptFilesAreRefusedNotReplaced(t *testing.T) {
	t.Run("broker.json garbage", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "broker.json")
		writeFile(t, path, "{not json")
		_, err := Open(dir)
		wantCorrupt(t, err, path, "restore it from a backup")
		if b, _ := os.ReadFile(path); string(b) != "{not json" {
			t.Fatal("a corrupt broker.json was overwritten")
		}
	})
	t.Run("broker.json with a foreign system account", func(t *testing.T) {
		dir := t.TempDir()
		mustOpen(t, dir)
		other := mustOpen(t, t.TempDir())
		path := filepath.Join(dir, "broker.json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var bf brokerFile
		if err := readFile(path, &bf, ""); err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte(bf.System.JWT), []byte(other.sysJWT), 1)
		writeFile(t, path, string(b))
		_, err = Open(dir)
		wantCorrupt(t, err, path, "system account jwt does not match the system keys")
	})
	t.Run("broker.json missing beside accounts", func(t *testing.T) {
		dir := t.TempDir()
		c := mustOpen(t, dir)
		if _, err := c.Space("prod"); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "broker.json")); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		wantCorrupt(t, err, filepath.Join(dir, "broker.json"), "the accounts it signed exist (prod)")
		if _, err := os.Stat(filepath.Join(dir, "broker.json")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a new broker.json was created over existing accounts")
		}
	})
	t.Run("account file garbage", func(t *testing.T) {
		dir := t.TempDir()
		c := mustOpen(t, dir)
		path := filepath.Join(dir, "account.70726f64.json")
		writeFile(t, path, `{"version":1,"space":"prod","seed":"nope"}`)
		_, err := c.Space("prod")
		wantCorrupt(t, err, path, `move it aside to give space "prod" a new account`)
		if _, err := c.AccountJWTs(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("AccountJWTs over a corrupt account: %v; want ErrCorrupt", err)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), "nope") {
			t.Fatal("a corrupt account file was overwritten")
		}
	})
	t.Run("account of another operator", func(t *testing.T) {
		dir, otherDir := t.TempDir(), t.TempDir()
		c := mustOpen(t, dir)
		other := mustOpen(t, otherDir)
		if _, err := other.Space("prod"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(otherDir, "account.70726f64.json"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "account.70726f64.json")
		writeFile(t, path, string(b))
		_, err = c.Space("prod")
		wantCorrupt(t, err, path, "not by this broker's operator")
	})
	t.Run("bad space name", func(t *testing.T) {
		c := mustOpen(t, t.TempDir())
		if _, err := c.Space("my space"); err == nil || !strings.Contains(err.Error(), `"my_space"`) {
			t.Fatalf("Space(%q) = %v; want a refusal naming my_space", "my space", err)
		}
	})
}

func TestSystemCreds(t *testing.T) {
	c := mustOpen(t, t.TempDir())
	creds, err := c.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	uc := decodeCreds(t, creds)
	if uc.IssuerAccount != c.SystemAccount() || uc.Issuer == c.SystemAccount() || uc.Expires == 0 {
		t.Fatalf("system user: issuer %s (account %q), expires %d; want issued by a signing key of SYS with an expiry", uc.Issuer, uc.IssuerAccount, uc.Expires)
	}
	if _, err := c.SystemCreds(-time.Second); err == nil {
		t.Fatal("a negative expiry was accepted")
	}
}

func mustOpen(t *testing.T, dir string) *Chain {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, err error, path, hint string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), hint) {
		t.Fatalf("err = %v; want ErrCorrupt naming %s and %q", err, path, hint)
	}
}

func decodeCreds(t *testing.T, creds []byte) *jwt.UserClaims {
	t.Helper()
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	return uc
}

// TestRouteSecret: the route secret is the same for every copy of one chain and differs
// between chains.
func TestRouteSecret(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := a.RouteSecret(); len(s) != 64 || s != b.RouteSecret() || s == other.RouteSecret() {
		t.Fatalf("secrets %q %q %q", s, b.RouteSecret(), other.RouteSecret())
	}
}
