package trust

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportImport: a chain exported from one folder imports into another as the same
// chain (operator, spaces, identities), minus the creds minted on the first machine;
// importing it again changes nothing; another chain is refused without force and moved
// aside, never deleted, with it.
func TestExportImport(t *testing.T) {
	src := filepath.Join(t.TempDir(), "auth")
	a, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"prod", "dev"} {
		if _, err := a.Space(s); err != nil {
			t.Fatal(err)
		}
	}
	uid, err := a.Identity("prod", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "creds"), dirMode); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "creds", "x.creds"), []byte("secret"), fileMode); err != nil {
		t.Fatal(err)
	}
	var arch bytes.Buffer
	n, err := Export(src, &arch)
	if err != nil || n < 4 {
		t.Fatalf("export: %d files, %v", n, err)
	}
	dst := filepath.Join(t.TempDir(), "auth")
	res, err := Import(bytes.NewReader(arch.Bytes()), dst, false)
	if err != nil || res.Unchanged || res.Replaced != "" || res.Files != n {
		t.Fatalf("import: %+v %v", res, err)
	}
	b, err := Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	spaces, _ := b.Spaces()
	if b.OperatorPublicKey() != a.OperatorPublicKey() || b.RouteSecret() != a.RouteSecret() || strings.Join(spaces, ",") != "dev,prod" {
		t.Fatalf("imported chain: operator %s spaces %v", b.OperatorPublicKey(), spaces)
	}
	if got, _ := b.Identity("prod", "alice"); got != uid {
		t.Fatalf("alice's uid %q, want %q", got, uid)
	}
	if _, err := os.Stat(filepath.Join(dst, "creds")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("creds were copied: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dst, brokerFileName)); err != nil || fi.Mode().Perm() != fileMode {
		t.Fatalf("broker.json: %v %v", fi, err)
	}

	if res, err := Import(bytes.NewReader(arch.Bytes()), dst, false); err != nil || !res.Unchanged {
		t.Fatalf("second import: %+v %v", res, err)
	}

	other := filepath.Join(t.TempDir(), "auth")
	if _, err := Open(other); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(other, brokerFileName))
	if _, err := Import(bytes.NewReader(arch.Bytes()), other, false); !errors.Is(err, ErrChainExists) {
		t.Fatalf("import over another chain: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(other, brokerFileName)); !bytes.Equal(before, after) {
		t.Fatal("the refused import changed broker.json")
	}
	res, err = Import(bytes.NewReader(arch.Bytes()), other, true)
	if err != nil || res.Replaced != other+".replaced.1" {
		t.Fatalf("forced import: %+v %v", res, err)
	}
	if kept, _ := os.ReadFile(filepath.Join(res.Replaced, brokerFileName)); !bytes.Equal(kept, before) {
		t.Fatal("the replaced chain was not kept")
	}
	if c, err := Open(other); err != nil || c.OperatorPublicKey() != a.OperatorPublicKey() {
		t.Fatalf("forced import: %v", err)
	}
}

// TestImportRefusesBadArchives: an archive that is not a chain, or names a path outside
// it, is refused and leaves nothing behind.
func TestImportRefusesBadArchives(t *testing.T) {
	tarOf := func(name string, typ byte, body string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: 0o600, Size: int64(len(body)), Linkname: "/etc/passwd"})
		_, _ = tw.Write([]byte(body))
		_ = tw.Close()
		return b.Bytes()
	}
	for name, c := range map[string]struct {
		arch []byte
		want string
	}{
		"escape":    {tarOf("../evil", tar.TypeReg, "x"), "want a relative path"},
		"absolute":  {tarOf("/evil", tar.TypeReg, "x"), "want a relative path"},
		"symlink":   {tarOf("broker.json", tar.TypeSymlink, ""), "not a plain file"},
		"no chain":  {tarOf("notes.txt", tar.TypeReg, "x"), `holds "notes.txt", which is not part of a trust chain`},
		"only dirs": {tarOf("space.74", tar.TypeDir, ""), "holds no broker.json"},
		"bad chain": {tarOf("broker.json", tar.TypeReg, "{}"), "does not load"},
		"not a tar": {[]byte("hello"), "read the archive"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "auth")
			_, err := Import(bytes.NewReader(c.arch), dst, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("import: %v, want %q", err, c.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

// TestImportRefusesExtraFiles: an exported chain with one more entry than Export writes
// (a file beside the chain, creds, a resolver folder, a script in a state folder, a temp
// file) is refused before anything is written: no folder, no temp folder, no file.
func TestImportRefusesExtraFiles(t *testing.T) {
	src := filepath.Join(t.TempDir(), "auth")
	c, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Identity("prod", "alice"); err != nil {
		t.Fatal(err)
	}
	var clean bytes.Buffer
	if _, err := Export(src, &clean); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(bytes.NewReader(clean.Bytes()), filepath.Join(t.TempDir(), "auth"), false); err != nil {
		t.Fatalf("the clean archive: %v", err)
	}
	for _, extra := range []string{"notes.txt", "creds/x.creds", "accounts/ABC.jwt", "space.70726f64/run.sh",
		"space.70726f64/agents/.alice.json.tmp", "space.70726f64/agents/x/y.json", "space.zz/idp.json", "account.prod.json",
		"space.70726f64/auth-service.json", ".broker.json.tmp"} {
		t.Run(extra, func(t *testing.T) {
			var arch bytes.Buffer
			tw := tar.NewWriter(&arch)
			tr := tar.NewReader(bytes.NewReader(clean.Bytes()))
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				b, _ := io.ReadAll(tr)
				_ = tw.WriteHeader(h)
				_, _ = tw.Write(b)
			}
			_ = tw.WriteHeader(&tar.Header{Name: extra, Typeflag: tar.TypeReg, Mode: 0o600, Size: 1})
			_, _ = tw.Write([]byte("x"))
			_ = tw.Close()
			parent := t.TempDir()
			_, err := Import(bytes.NewReader(arch.Bytes()), filepath.Join(parent, "cotal", "auth"), false)
			if err == nil || !strings.Contains(err.Error(), "not part of a trust chain") {
				t.Fatalf("import: %v", err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

// TestExportCarriesUserAuthState: a user-auth space's state folder (space.<hex>/: the
// IdP pin, the bearer issuer key, the owner secret, the sentinel) goes with the chain, so
// every node runs the same auth service, and imports 0600; the readiness file a running
// auth service writes there (auth-service.json) is one node's, and stays behind.
func TestExportCarriesUserAuthState(t *testing.T) {
	src := filepath.Join(t.TempDir(), "auth")
	if _, err := Open(src); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(src, "space.7465616d")
	if err := os.MkdirAll(state, dirMode); err != nil {
		t.Fatal(err)
	}
	const readiness = "auth-service.json"
	carried := []string{"idp.json", "issuer.json", "owner-secret.json", "sentinel.creds"}
	for _, f := range append(carried, readiness) {
		if err := os.WriteFile(filepath.Join(state, f), []byte(f), fileMode); err != nil {
			t.Fatal(err)
		}
	}
	var arch bytes.Buffer
	if _, err := Export(src, &arch); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "auth")
	if _, err := Import(bytes.NewReader(arch.Bytes()), dst, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range carried {
		p := filepath.Join(dst, "space.7465616d", f)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != f {
			t.Fatalf("%s: %q %v", f, b, err)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != fileMode {
			t.Fatalf("%s: mode %v, want %v", f, fi.Mode().Perm(), os.FileMode(fileMode))
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "space.7465616d", readiness)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s was carried: %v", readiness, err)
	}
}
