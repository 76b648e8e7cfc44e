//go:build unix

package extension_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/extension"
)

// script writes an executable shell script dir/file that answers --version with version.
func script(t testing.TB, dir, file, version string) string {
	t.Helper()
	p := filepath.Join(dir, file)
	body := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"%s %s\"; exit 0; fi\necho \"ran %s $*\"\n", file, version, file)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func newPrefix(t testing.TB) *extension.Prefix {
	t.Helper()
	return &extension.Prefix{Dir: filepath.Join(t.TempDir(), "cotal", "extensions"), LockWait: 30 * time.Second}
}

func lock(t testing.TB, p *extension.Prefix) *extension.Guard {
	t.Helper()
	g, err := p.Lock(t.Context())
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	t.Cleanup(func() { _ = g.Release() })
	return g
}

// storeFiles lists every file under the prefix's store.
func storeFiles(t testing.TB, p *extension.Prefix) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(p.Dir, extension.StoreDir), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(p.Dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

// consistent checks that the lock parses, every record's file is there with its hash, and
// the store holds nothing else.
func consistent(t testing.TB, p *extension.Prefix) *extension.Lockfile {
	t.Helper()
	lf, err := p.ReadLockfile()
	if err != nil {
		t.Fatalf("read lock: %v", err)
	}
	want := map[string]bool{}
	for _, r := range lf.Extensions {
		st, err := p.Check(r)
		if err != nil || st != extension.FileOK {
			t.Fatalf("record %s: file %s: %s %v", r.Name, r.File, st, err)
		}
		want[r.File] = true
	}
	for _, f := range storeFiles(t, p) {
		if !want[f] {
			t.Errorf("store holds %s, which the lock does not name", f)
		}
	}
	return lf
}

func TestInstallLocal(t *testing.T) {
	p := newPrefix(t)
	src := script(t, t.TempDir(), "cotal-hello", "v1.2.3")
	g := lock(t, p)
	rec, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: src, FirstParty: true})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := extension.HashFile(src)
	if rec.Name != "hello" || rec.Version != "v1.2.3" || rec.Spec != src || rec.SHA256 != sum || !rec.FirstParty {
		t.Fatalf("record %+v", rec)
	}
	if rec.File != "store/"+sum+"/cotal-hello" {
		t.Fatalf("file %q", rec.File)
	}
	fi, err := os.Stat(p.Path(rec))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("installed file: %v %v", fi, err)
	}
	raw, err := os.ReadFile(p.LockfilePath())
	if err != nil {
		t.Fatal(err)
	}
	var onDisk extension.Lockfile
	if err := json.Unmarshal(raw, &onDisk); err != nil || len(onDisk.Extensions) != 1 || onDisk.Extensions[0].SHA256 != sum {
		t.Fatalf("lock on disk %s: %v", raw, err)
	}
	consistent(t, p)

	// The same name again is refused unless replacing.
	if _, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: src}); !errors.Is(err, extension.ErrExists) {
		t.Fatalf("second install: %v", err)
	}
	newer := script(t, t.TempDir(), "cotal-hello", "v1.3.0")
	rec2, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: newer, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Version != "v1.3.0" || rec2.FirstParty {
		t.Fatalf("replaced record %+v", rec2)
	}
	if files := storeFiles(t, p); len(files) != 1 || files[0] != rec2.File {
		t.Fatalf("old file not swept: %v", files)
	}
	consistent(t, p)

	if _, err := p.Remove(g, "hello"); err != nil {
		t.Fatal(err)
	}
	if lf := consistent(t, p); len(lf.Extensions) != 0 {
		t.Fatalf("after remove: %+v", lf.Extensions)
	}
	if _, err := p.Remove(g, "hello"); !errors.Is(err, extension.ErrNotInstalled) {
		t.Fatalf("remove twice: %v", err)
	}
}

func TestInstallRefusals(t *testing.T) {
	p := newPrefix(t)
	dir := t.TempDir()
	g := lock(t, p)
	good := script(t, dir, "cotal-ok", "v1")
	if _, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: good}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(p.LockfilePath())

	broken := filepath.Join(dir, "cotal-broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho nope >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(dir, "cotal-silent")
	if err := os.WriteFile(silent, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := script(t, dir, "hello", "v1")
	for _, c := range []struct {
		req  extension.InstallRequest
		want error
		msg  string
	}{
		{extension.InstallRequest{Spec: broken}, extension.ErrNoVersion, "nope"},
		{extension.InstallRequest{Spec: silent}, extension.ErrNoVersion, "no version line"},
		{extension.InstallRequest{Spec: plain}, extension.ErrBadName, "pass --name"},
		{extension.InstallRequest{Spec: plain, Name: "Bad Name"}, extension.ErrBadName, "lowercase"},
		{extension.InstallRequest{Spec: good, Name: "up", Reserved: func(n string) bool { return n == "up" }}, extension.ErrReserved, "cotal up"},
		{extension.InstallRequest{Spec: filepath.Join(dir, "cotal-absent")}, os.ErrNotExist, "no such file"},
		{extension.InstallRequest{Spec: dir, Name: "dir"}, nil, "not a regular file"},
		{extension.InstallRequest{Spec: "example.com/x/cotal-x@v1", FirstParty: true}, nil, "first-party only under github.com/cotal-ai/"},
		{extension.InstallRequest{Spec: "github.com/cotal-ai/cotal-web@v1.0.0"}, extension.ErrNoGo, "install Go"},
	} {
		pp := *p
		pp.GoCmd = "no-such-go-command"
		_, err := pp.Install(t.Context(), g, c.req)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("install %+v: got %v, want %v containing %q", c.req.Spec, err, c.want, c.msg)
		}
	}
	after, _ := os.ReadFile(p.LockfilePath())
	if string(before) != string(after) {
		t.Fatalf("a refused install changed the lock:\n%s\n%s", before, after)
	}
	consistent(t, p)
}

func TestCrashLeftovers(t *testing.T) {
	p := newPrefix(t)
	g := lock(t, p)
	rec, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: script(t, t.TempDir(), "cotal-a", "v1")})
	if err != nil {
		t.Fatal(err)
	}
	// What a crash at each step leaves: a staged file, a file renamed into the store but
	// never committed to the lock, a half-written lock temp, a temp GOBIN.
	store := filepath.Join(p.Dir, extension.StoreDir)
	orphan := filepath.Join(store, strings.Repeat("b", 64))
	for _, d := range []string{orphan, filepath.Join(p.Dir, ".tmp-gobin-1")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(store, ".tmp-123"), filepath.Join(orphan, "cotal-b"), filepath.Join(p.Dir, ".extensions.lock.tmp-9"),
		filepath.Join(store, strings.Repeat("a", 64))} {
		if err := os.WriteFile(f, []byte("{half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Readers tolerate all of it.
	lf, err := p.ReadLockfile()
	if err != nil || len(lf.Extensions) != 1 {
		t.Fatalf("read with leftovers: %+v %v", lf, err)
	}
	if st, err := p.Check(rec); err != nil || st != extension.FileOK {
		t.Fatalf("check: %s %v", st, err)
	}
	if err := p.Sweep(g); err != nil {
		t.Fatal(err)
	}
	consistent(t, p)
	for _, gone := range []string{orphan, filepath.Join(p.Dir, ".tmp-gobin-1"), filepath.Join(p.Dir, ".extensions.lock.tmp-9")} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the sweep", gone)
		}
	}
}

func TestCheckStates(t *testing.T) {
	p := newPrefix(t)
	g := lock(t, p)
	rec, err := p.Install(t.Context(), g, extension.InstallRequest{Spec: script(t, t.TempDir(), "cotal-a", "v1")})
	if err != nil {
		t.Fatal(err)
	}
	f := p.Path(rec)
	raw, _ := os.ReadFile(f)
	raw[len(raw)-2] ^= 1
	if err := os.WriteFile(f, raw, 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Check(rec); err != nil || st != extension.FileModified {
		t.Fatalf("modified: %s %v", st, err)
	}
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Check(rec); err != nil || st != extension.FileMissing {
		t.Fatalf("missing: %s %v", st, err)
	}
}

func TestLockIsExclusiveAndLendable(t *testing.T) {
	p := newPrefix(t)
	g := lock(t, p)
	other := *p
	other.LockWait = 20 * time.Millisecond
	_, err := other.Lock(t.Context())
	if !errors.Is(err, extension.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	other.LockWait = time.Minute
	if _, err := other.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled ctx: %v", err)
	}
	// A child inherits the open file description and so shares the lock.
	fd, err := syscall.Dup(int(g.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(t.Context(), func(k string) string {
		if k == extension.LockFDEnv {
			return fmt.Sprint(fd)
		}
		return ""
	})
	if err != nil {
		t.Fatalf("borrow: %v", err)
	}
	if _, err := p.Install(t.Context(), b, extension.InstallRequest{Spec: script(t, t.TempDir(), "cotal-a", "v1")}); err != nil {
		t.Fatalf("install under a borrowed lock: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Lock(ctx); err == nil {
		t.Fatal("releasing a borrowed lock released the lender's")
	}
	// A descriptor of another file is refused (and closed: Borrow owns what it is given).
	f, err := os.Open(p.LockfilePath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	other2, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Borrow(uintptr(other2)); err == nil || !strings.Contains(err.Error(), "is not") {
		t.Fatalf("borrow of another file: %v", err)
	}
	// Changes without the prefix's lock are refused.
	if _, err := other.Remove(nil, "a"); err == nil {
		t.Fatal("remove without a lock")
	}
	elsewhere := newPrefix(t)
	if _, err := elsewhere.Remove(g, "a"); err == nil || !strings.Contains(err.Error(), "lock held is for") {
		t.Fatalf("remove with another prefix's lock: %v", err)
	}
}

// TestConcurrentChanges runs installs, replacements and removals from many goroutines,
// each with its own open lock file (flock locks conflict between open file descriptions
// as between processes); the lock must parse and match the files afterwards.
func TestConcurrentChanges(t *testing.T) {
	base := newPrefix(t)
	src := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			p := *base
			name := fmt.Sprintf("x%d", i%4)
			file := script(t, filepath.Join(src), fmt.Sprintf("cotal-%s-%d", name, i), fmt.Sprintf("v%d", i))
			for round := range 3 {
				g, err := p.Lock(t.Context())
				if err != nil {
					errs <- err
					return
				}
				_, err = p.Install(t.Context(), g, extension.InstallRequest{Spec: file, Name: name, Replace: true})
				if err == nil && round == 1 && i%2 == 0 {
					_, err = p.Remove(g, name)
				}
				if rerr := g.Release(); rerr != nil {
					err = errors.Join(err, rerr)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lf := consistent(t, base)
	if len(lf.Extensions) != 4 {
		t.Fatalf("want x0..x3 installed, got %+v", lf.Extensions)
	}
}

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		in, file, module, version, bin, err string
	}{
		{in: "/opt/cotal-a", file: "/opt/cotal-a", bin: "cotal-a"},
		{in: "./bin/cotal-a", file: "/wd/bin/cotal-a", bin: "cotal-a"},
		{in: "cotal-a", file: "/wd/cotal-a", bin: "cotal-a"},
		{in: "./odd@name", file: "/wd/odd@name", bin: "odd@name"},
		{in: "github.com/cotal-ai/cotal-web@v0.3.0", module: "github.com/cotal-ai/cotal-web", version: "v0.3.0", bin: "cotal-web"},
		{in: "example.com/x/cotal-y/v2@latest", module: "example.com/x/cotal-y/v2", version: "latest", bin: "cotal-y"},
		{in: "example.com/x/cmd/cotal-z@abc123", module: "example.com/x/cmd/cotal-z", version: "abc123", bin: "cotal-z"},
		{in: "cotal-web@v1", err: "does not start with a domain"},
		{in: "github.com/x/../y@v1", err: "not clean"},
		{in: "github.com/x/y@", err: "not a module version"},
		{in: "github.com/x/y z@v1", err: "cannot hold"},
		{in: "~/bin/cotal-a", err: "did not expand ~"},
		{in: "  ", err: "empty spec"},
	} {
		s, err := extension.ParseSpec(c.in, "/wd")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || s.File != c.file || s.Module != c.module || s.Version != c.version || s.BinaryName() != c.bin {
			t.Errorf("%q: %+v (bin %q) %v", c.in, s, s.BinaryName(), err)
		}
		if s.IsModule() && s.String() != c.in {
			t.Errorf("%q: String %q", c.in, s.String())
		}
	}
}

func TestUpdateSpec(t *testing.T) {
	for _, c := range []struct {
		rec       extension.Record
		cli, want string
	}{
		{extension.Record{Name: "web", Spec: "github.com/cotal-ai/cotal-web@v0.1.0", FirstParty: true}, "v0.2.0", "github.com/cotal-ai/cotal-web@v0.2.0"},
		{extension.Record{Name: "web", Spec: "github.com/cotal-ai/cotal-web@v0.1.0", FirstParty: true}, "dev", "github.com/cotal-ai/cotal-web@v0.1.0"},
		{extension.Record{Name: "a", Spec: "/opt/cotal-a", FirstParty: true}, "v0.2.0", "/opt/cotal-a"},
		{extension.Record{Name: "x", Spec: "example.com/cotal-x@v1"}, "v0.2.0", "example.com/cotal-x@v1"},
	} {
		if got := c.rec.UpdateSpec(c.cli); got != c.want {
			t.Errorf("%+v at %s: %q, want %q", c.rec, c.cli, got, c.want)
		}
	}
}

func TestReadLockfileRejects(t *testing.T) {
	p := newPrefix(t)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ body, err string }{
		{"{half", "decode"},
		{`{"format": 9, "extensions": []}`, "newer cotal"},
		{`{"format": 1, "extensions": [{"name": "a", "sha256": "` + strings.Repeat("a", 64) + `", "file": "../../bin/sh"}]}`, "is not store/"},
		{`{"format": 1, "extensions": [{"name": "../a", "sha256": "x", "file": "x"}]}`, "invalid extension name"},
	} {
		if err := os.WriteFile(p.LockfilePath(), []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := p.ReadLockfile(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.body, err, c.err)
		}
	}
}
