package selfupdate_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/selfupdate"
)

type entry struct {
	name string
	body string
	typ  byte // tar type; 0 is a regular file
}

func writeTarGz(t *testing.T, path string, entries ...entry) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.typ != 0 {
			h.Typeflag, h.Size, h.Linkname = e.typ, 0, "/etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sumsFor(t *testing.T, dir string, files ...string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := sha256.Sum256(data)
		b.WriteString(hex.EncodeToString(d[:]) + "  " + filepath.Base(f) + "\n")
	}
	path := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExtractBinary unpacks only the top-level cotal of an archive, and refuses an archive
// without one, with two, or with a link where the binary should be, writing nothing.
func TestExtractBinary(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "cotal_v1_linux_amd64.tar.gz")
	writeTarGz(t, good, entry{name: "README.md", body: "read me"}, entry{name: "cotal", body: "#!/bin/sh\n"})
	out := t.TempDir()
	bin, err := selfupdate.ExtractBinary(good, out)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(bin); string(b) != "#!/bin/sh\n" {
		t.Fatalf("unpacked %q", b)
	}
	if fi, _ := os.Stat(bin); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("unpacked %d files, want the binary only", len(ents))
	}

	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, _ := zw.Create("cotal.exe")
	_, _ = w.Write([]byte("MZ"))
	_ = zw.Close()
	zipPath := filepath.Join(dir, "cotal_v1_windows_amd64.zip")
	if err := os.WriteFile(zipPath, zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if bin, err := selfupdate.ExtractBinary(zipPath, t.TempDir()); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(bin); string(b) != "MZ" {
		t.Fatalf("unpacked %q from the zip", b)
	}

	for name, c := range map[string]struct {
		entries []entry
		err     string
	}{
		"none":    {[]entry{{name: "README.md", body: "x"}}, "no cotal binary"},
		"two":     {[]entry{{name: "cotal", body: "a"}, {name: "./cotal", body: "b"}}, "want one regular file"},
		"symlink": {[]entry{{name: "cotal", typ: tar.TypeSymlink}}, "want one regular file"},
		"empty":   {[]entry{{name: "cotal", body: ""}}, "want 1 to"},
		"nested":  {[]entry{{name: "bin/cotal", body: "a"}}, "no cotal binary"},
	} {
		path := filepath.Join(dir, name+".tar.gz")
		writeTarGz(t, path, c.entries...)
		empty := t.TempDir()
		if _, err := selfupdate.ExtractBinary(path, empty); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want %q", name, err, c.err)
		}
		if ents, _ := os.ReadDir(empty); len(ents) != 0 {
			t.Errorf("%s: a refused archive left %d files", name, len(ents))
		}
	}
	truncated := filepath.Join(dir, "truncated.tar.gz")
	b, _ := os.ReadFile(good)
	if err := os.WriteFile(truncated, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := selfupdate.ExtractBinary(truncated, t.TempDir()); err == nil {
		t.Error("a truncated archive was unpacked")
	}
}

// TestVerifyChecksum accepts the listed digest (sha256sum's text or binary mode) and
// refuses another digest, an unlisted file and a malformed line.
func TestVerifyChecksum(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "cotal_v1_linux_amd64.tar.gz")
	if err := os.WriteFile(a, []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	sums := sumsFor(t, dir, a)
	if _, err := selfupdate.VerifyChecksum(a, sums); err != nil {
		t.Fatal(err)
	}
	line, _ := os.ReadFile(sums)
	star := filepath.Join(dir, "star")
	_ = os.WriteFile(star, []byte(strings.Replace(string(line), "  ", " *", 1)), 0o644)
	if _, err := selfupdate.VerifyChecksum(a, star); err != nil {
		t.Fatalf("binary-mode line: %v", err)
	}
	if err := os.WriteFile(a, []byte("archivX"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := selfupdate.VerifyChecksum(a, sums); !errors.Is(err, selfupdate.ErrChecksum) {
		t.Fatalf("a changed archive: %v", err)
	}
	other := filepath.Join(dir, "cotal_v1_darwin_arm64.tar.gz")
	_ = os.WriteFile(other, []byte("x"), 0o644)
	if _, err := selfupdate.VerifyChecksum(other, sums); !errors.Is(err, selfupdate.ErrChecksum) || !strings.Contains(err.Error(), "lists no") {
		t.Fatalf("an unlisted archive: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	_ = os.WriteFile(bad, []byte("nothex  cotal_v1_linux_amd64.tar.gz\n"), 0o644)
	if _, err := selfupdate.VerifyChecksum(a, bad); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a malformed line: %v", err)
	}
}
