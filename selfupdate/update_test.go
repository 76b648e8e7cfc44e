package selfupdate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/extension"
	"github.com/cotal-ai/cotal/internal/cli"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/selfupdate"
)

// cliEnv makes this test binary behave as the cotal CLI, so the extension pass can
// reinstall in real child processes.
const cliEnv = "COTAL_UPDATE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// machine is a config folder, machine home and project in a temp folder.
type machine struct {
	root, xdg, config, home, project string
	prefix                           *extension.Prefix
}

func newMachine(t testing.TB) *machine {
	t.Helper()
	root := t.TempDir()
	m := &machine{root: root, xdg: filepath.Join(root, "home", ".config"), home: filepath.Join(root, "home", ".cotal"),
		project: filepath.Join(root, "proj", ".cotal")}
	m.config = filepath.Join(m.xdg, "cotal")
	m.prefix = &extension.Prefix{Dir: filepath.Join(m.config, "extensions"), LockWait: 30 * time.Second}
	for _, d := range []string{m.config, m.home, m.project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func (m *machine) updater(t testing.TB, cliVersion string, notes *[]string) *selfupdate.Updater {
	return &selfupdate.Updater{
		ConfigDir: m.config, HomeDir: m.home, ProjectDir: m.project,
		ConfigRoot: selfupdate.Root{Label: "operator config", Path: m.config, Env: "XDG_CONFIG_HOME", Base: m.xdg},
		Check:      selfupdate.AncestorCheck{UID: os.Geteuid()},
		Prefix:     m.prefix, CLIVersion: cliVersion,
		Reinstall: selfupdate.Child{Exe: testExe(t), Env: append(os.Environ(), cliEnv+"=1", "XDG_CONFIG_HOME="+m.xdg,
			"HOME="+filepath.Join(m.root, "home"), "COTAL_HOME="+m.home)}.Reinstall,
		Now: func() time.Time { return testclock.Epoch(t) },
		Say: func(n selfupdate.Note) {
			if notes != nil {
				*notes = append(*notes, n.String())
			}
		},
	}
}

func testExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// script writes an executable that answers --version with version.
func script(t testing.TB, dir, file, version string) string {
	t.Helper()
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, fmt.Appendf(nil, "#!/bin/sh\necho \"%s %s\"\n", file, version), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (m *machine) install(t testing.TB, spec string, firstParty bool) extension.Record {
	t.Helper()
	g, err := m.prefix.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	rec, err := m.prefix.Install(t.Context(), g, extension.InstallRequest{Spec: spec, FirstParty: firstParty})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// snapshot records every path under root with its type, mode, size, mtime and the hash
// of its content.
func snapshot(t testing.TB, root string) string { return snapshotOf(t, root, false) }

// snapshotOf is snapshot, leaving out the advisory lock file when skipMutex is set.
func snapshotOf(t testing.TB, root string, skipMutex bool) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if skipMutex && d.Name() == extension.MutexName {
			return nil // the advisory lock file: its holder's pid is advice, not state
		}
		line := fmt.Sprintf("%s %v %d %d", path, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestUnsafeAncestorsRefuseBeforeAnyWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a folder to another user")
	}
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, m *machine) string // makes a folder unsafe, returns it
		reason string
		fix    string
	}{
		{"symlinked folder", func(t *testing.T, m *machine) string {
			real := filepath.Join(m.root, "real-config")
			if err := os.Rename(m.xdg, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, m.xdg); err != nil {
				t.Fatal(err)
			}
			return m.xdg
		}, "is a symbolic link to", "export XDG_CONFIG_HOME="},
		{"folder owned by another user", func(t *testing.T, m *machine) string {
			d := filepath.Join(m.root, "home")
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return d
		}, "is owned by uid 65534", "sudo chown 0 "},
		{"world-writable folder", func(t *testing.T, m *machine) string {
			if err := os.Chmod(m.config, 0o777); err != nil {
				t.Fatal(err)
			}
			return m.config
		}, "is writable by group and others (mode 0777) and has no sticky bit", "chmod go-w "},
		{"group-writable project folder", func(t *testing.T, m *machine) string {
			d := filepath.Dir(m.project)
			if err := os.Chmod(d, 0o770); err != nil {
				t.Fatal(err)
			}
			return d
		}, "is writable by its group", "chmod go-w "},
		{"symlinked project", func(t *testing.T, m *machine) string {
			proj := filepath.Dir(m.project)
			if err := os.Rename(proj, proj+"-real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(proj+"-real", proj); err != nil {
				t.Fatal(err)
			}
			return proj
		}, "is a symbolic link", "cd "},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(t)
			src := script(t, t.TempDir(), "cotal-a", "v9") // first-party at another version: would be reinstalled
			m.install(t, src, true)
			if err := os.WriteFile(filepath.Join(m.config, "config.json"), []byte("{corrupt"), 0o600); err != nil {
				t.Fatal(err) // would be repaired
			}
			bad := c.break_(t, m)
			before := snapshot(t, m.root)
			var notes []string
			_, err := m.updater(t, "v1.0.0", &notes).Run(t.Context())
			var unsafe *selfupdate.UnsafeAncestorError
			if !errors.As(err, &unsafe) {
				t.Fatalf("want an unsafe ancestor error, got %v", err)
			}
			if unsafe.Path != bad || !strings.Contains(unsafe.Reason, c.reason) || !strings.HasPrefix(unsafe.Fix, c.fix) {
				t.Fatalf("got %q %q fix %q; want %s %q %q", unsafe.Path, unsafe.Reason, unsafe.Fix, bad, c.reason, c.fix)
			}
			if len(notes) != 0 {
				t.Fatalf("update said %q before refusing", notes)
			}
			if after := snapshot(t, m.root); after != before {
				t.Fatalf("the tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestSafeAncestorsAccepted(t *testing.T) {
	m := newMachine(t)
	sticky := filepath.Join(m.root, "shared")
	if err := os.Mkdir(sticky, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	chk := selfupdate.AncestorCheck{UID: os.Geteuid()}
	roots := []selfupdate.Root{
		{Label: "sticky", Path: filepath.Join(sticky, "not", "yet", "there")},
		{Label: "tmp", Path: filepath.Join(os.TempDir(), "cotal-test-absent")},
		{Label: "tmp itself", Path: "/tmp"},
		{Label: "config", Path: m.config},
	}
	if fi, err := os.Lstat("/var/run"); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		roots = append(roots, selfupdate.Root{Label: "system link", Path: "/var/run"})
	}
	if err := chk.CheckAncestors(roots...); err != nil {
		t.Fatal(err)
	}
	// A link named like a system link but not at that path is still refused.
	link := filepath.Join(m.root, "run")
	if err := os.Symlink("/run", link); err != nil {
		t.Fatal(err)
	}
	if err := chk.CheckAncestors(selfupdate.Root{Label: "x", Path: filepath.Join(link, "x")}); err == nil {
		t.Fatal("a user symlink was accepted")
	}
	// A file where a folder should be is refused.
	file := filepath.Join(m.root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var unsafe *selfupdate.UnsafeAncestorError
	if err := chk.CheckAncestors(selfupdate.Root{Label: "x", Path: filepath.Join(file, "x")}); !errors.As(err, &unsafe) || unsafe.Reason != "is not a folder" {
		t.Fatalf("file as folder: %v", err)
	}
}

func TestUpdateTwiceThenOneByte(t *testing.T) {
	m := newMachine(t)
	src := t.TempDir()
	var names []string
	for _, n := range []string{"a", "b", "c"} {
		m.install(t, script(t, src, "cotal-"+n, "v1.0.0"), true)
		names = append(names, n)
	}
	third := m.install(t, script(t, src, "cotal-x", "v3"), false)
	old := m.install(t, script(t, t.TempDir(), "cotal-old", "v0.9.0"), true)

	var first []string
	res, err := m.updater(t, "v1.0.0", &first).Run(t.Context())
	if err != nil {
		t.Fatalf("update: %v\n%s", err, strings.Join(first, "\n"))
	}
	if res.Verified != 3 || res.Kept != 1 || res.Reinstalled != 1 {
		t.Fatalf("first run %+v\n%s", res, strings.Join(first, "\n"))
	}
	out := strings.Join(first, "\n")
	if !strings.Contains(out, "↻ old@v0.9.0 reinstalling from "+old.Spec+": version differs: locked v0.9.0, cotal is v1.0.0") {
		t.Fatalf("no reason line:\n%s", out)
	}
	if !strings.Contains(out, "→ wrote "+filepath.Join(m.project, "agents", "default.md")) {
		t.Fatalf("no persona seed:\n%s", out)
	}
	// cotal-old still answers v0.9.0; make the source current, as a new release would.
	script(t, filepath.Dir(old.Spec), "cotal-old", "v1.0.0")
	if _, err := m.updater(t, "v1.0.0", nil).Run(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A current machine: nothing is reinstalled, every first-party extension is verified.
	var second []string
	before := snapshotOf(t, m.prefix.Dir, true)
	res, err = m.updater(t, "v1.0.0", &second).Run(t.Context())
	if err != nil || res.Reinstalled != 0 || res.Verified != 4 || res.Kept != 1 {
		t.Fatalf("second run %+v %v\n%s", res, err, strings.Join(second, "\n"))
	}
	for _, n := range append(names, "old") {
		if !strings.Contains(strings.Join(second, "\n"), "✓ "+n+"@v1.0.0 verified (first-party,") {
			t.Fatalf("no verified line for %s:\n%s", n, strings.Join(second, "\n"))
		}
	}
	if !strings.Contains(strings.Join(second, "\n"), "✓ x@v3 intact (third-party") {
		t.Fatalf("no line for the third-party extension:\n%s", strings.Join(second, "\n"))
	}
	if after := snapshotOf(t, m.prefix.Dir, true); after != before {
		t.Fatalf("a verified pass changed the prefix:\n%s\n%s", before, after)
	}

	// One byte of b changes: the next update reinstalls b alone, and says why.
	lf, _ := m.prefix.ReadLockfile()
	b, _ := lf.Find("b")
	raw, _ := os.ReadFile(m.prefix.Path(b))
	raw[len(raw)-1] = ' '
	if err := os.WriteFile(m.prefix.Path(b), raw, 0o700); err != nil {
		t.Fatal(err)
	}
	// And x's file goes missing: a third-party extension is reinstalled from its spec too.
	if err := os.Remove(m.prefix.Path(third)); err != nil {
		t.Fatal(err)
	}
	var third3 []string
	res, err = m.updater(t, "v1.0.0", &third3).Run(t.Context())
	out = strings.Join(third3, "\n")
	if err != nil || res.Reinstalled != 2 || res.Verified != 3 {
		t.Fatalf("third run %+v %v\n%s", res, err, out)
	}
	if !strings.Contains(out, "↻ b@v1.0.0 reinstalling from "+b.Spec+": hash differs: ") ||
		!strings.Contains(out, "↻ x@v3 reinstalling from "+third.Spec+": file missing: ") ||
		strings.Count(out, "↻") != 2 {
		t.Fatalf("third run lines:\n%s", out)
	}
	lf, _ = m.prefix.ReadLockfile()
	for _, r := range lf.Extensions {
		if st, err := m.prefix.Check(r); st != extension.FileOK || err != nil {
			t.Fatalf("%s after repair: %s %v", r.Name, st, err)
		}
	}
}

func TestRepairConfigAndPersonas(t *testing.T) {
	m := newMachine(t)
	now := testclock.Epoch(t)
	bak := ".bak-" + now.UTC().Format("20060102T150405Z") // the aside name RepairConfig stamps
	cfg := filepath.Join(m.config, "config.json")

	// Missing: seeded.
	notes, err := selfupdate.RepairConfig(m.config, now)
	if err != nil || len(notes) != 1 || notes[0].String() != "→ wrote "+cfg+" (was missing)" {
		t.Fatalf("%v %v", notes, err)
	}
	// Kept when valid, whatever it holds.
	user := `{"spawn": {"env": ["MY_KEY"]}}`
	if err := os.WriteFile(cfg, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	if notes, err = selfupdate.RepairConfig(m.config, now); err != nil || notes[0].Mark != "✓" {
		t.Fatalf("%v %v", notes, err)
	}
	if raw, _ := os.ReadFile(cfg); string(raw) != user {
		t.Fatalf("valid config changed: %s", raw)
	}
	// Corrupt: moved aside, reseeded, said.
	for _, bad := range []string{"{half", "[1, 2]", "null"} {
		if err := os.WriteFile(cfg, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		notes, err = selfupdate.RepairConfig(m.config, now)
		if err != nil || len(notes) != 2 || !strings.Contains(notes[0].Text, "moved it aside to "+cfg+bak) {
			t.Fatalf("%q: %v %v", bad, notes, err)
		}
		if raw, _ := os.ReadFile(cfg); string(raw) != "{}\n" {
			t.Fatalf("not reseeded: %s", raw)
		}
	}
	for _, b := range []string{bak, bak + "-2", bak + "-3"} {
		if _, err := os.Stat(cfg + b); err != nil {
			t.Fatalf("backup %s: %v", b, err)
		}
	}
	if raw, _ := os.ReadFile(cfg + bak); string(raw) != "{half" {
		t.Fatalf("backup lost the bytes: %s", raw)
	}

	// Personas.
	path := selfupdate.PersonaPath(m.project, "default")
	seed := selfupdate.SeedPersonas()[0].Content
	if notes, err := selfupdate.RepairPersonas(m.project, now); err != nil || notes[0].String() != "→ wrote "+path+" (was missing)" {
		t.Fatalf("%v %v", notes, err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != seed || !bytes.Contains(raw, []byte("\n# managed by cotal-setup\n")) {
		t.Fatalf("seeded persona:\n%s", raw)
	}
	// Managed but edited: backed up and refreshed.
	edited := strings.Replace(seed, "role: default", "role: edited", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := selfupdate.RepairPersonas(m.project, now); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != seed {
		t.Fatal("managed persona not refreshed")
	}
	if raw, _ := os.ReadFile(path + ".bak"); string(raw) != edited {
		t.Fatal("edited copy not kept in .bak")
	}
	// Marker removed: the user's file, left alone.
	mine := strings.Replace(edited, "# managed by cotal-setup\n", "", 1)
	if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	notes, err = selfupdate.RepairPersonas(m.project, now)
	if err != nil || !strings.Contains(notes[0].Text, "kept: you removed its managed marker") {
		t.Fatalf("%v %v", notes, err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != mine {
		t.Fatal("user persona changed")
	}
	// Not a persona at all (truncated): moved aside and reseeded.
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if notes, err = selfupdate.RepairPersonas(m.project, now); err != nil || len(notes) != 2 || !strings.Contains(notes[0].Text, "was not a persona file") {
		t.Fatalf("%v %v", notes, err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != seed {
		t.Fatal("corrupt persona not reseeded")
	}
}

func TestReplaceSelf(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "cotal")
	if err := os.WriteFile(target, []byte("#!/bin/sh\necho cotal version v1\n"), 0o751); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho broken >&2\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(notExec, []byte("just text"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, from := range []string{bad, notExec, filepath.Join(dir, "absent"), target} {
		if _, err := selfupdate.ReplaceSelf(t.Context(), from, target); err == nil {
			t.Fatalf("%s replaced the binary", from)
		} else if from == bad && (!errors.Is(err, selfupdate.ErrBadBinary) || !strings.Contains(err.Error(), "broken")) {
			t.Fatalf("bad binary: %v", err)
		}
		if after := snapshot(t, dir); after != before {
			t.Fatalf("a failed check changed the folder:\n%s\n%s", before, after)
		}
	}
	good := filepath.Join(t.TempDir(), "good")
	body := []byte("#!/bin/sh\necho cotal version v2\n")
	if err := os.WriteFile(good, body, 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := selfupdate.ReplaceSelf(t.Context(), good, target)
	if err != nil || v != "cotal version v2" {
		t.Fatalf("%q %v", v, err)
	}
	raw, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if !bytes.Equal(raw, body) || fi.Mode().Perm() != 0o751 {
		t.Fatalf("replaced: %s %v", raw, fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := selfupdate.ReplaceSelf(ctx, good, target); err == nil {
		t.Fatal("replace with a cancelled context")
	}
}
