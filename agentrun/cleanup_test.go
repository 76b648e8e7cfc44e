package agentrun

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/connector"
)

// TestCleanupStaysInsideItsFolders: a removal list (as a seat record on disk holds it) that
// names files outside the run's folders, by absolute path, by .. or through a symbolic
// link, removes none of them; what lies inside is removed.
func TestCleanupStaysInsideItsFolders(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "project", ".cotal", "codex", "w")
	victims := filepath.Join(base, "victims")
	for _, d := range []string{home, victims} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) string {
		t.Helper()
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := write(filepath.Join(home, "config.toml"))
	outside := write(filepath.Join(victims, "abs"))
	dotdot := write(filepath.Join(victims, "dotdot"))
	linked := write(filepath.Join(victims, "linked"))
	if err := os.Symlink(victims, filepath.Join(home, "out")); err != nil {
		t.Fatal(err)
	}
	// A link inside the folder is removed itself, never what it points to.
	if err := os.Symlink(write(filepath.Join(victims, "target")), filepath.Join(home, "auth.json")); err != nil {
		t.Fatal(err)
	}

	err := Cleanup(connector.Spec{Dirs: []string{home}, Remove: []string{
		inside,
		filepath.Join(home, "auth.json"),
		outside,
		filepath.Join(home, "..", "..", "..", "..", "victims", "dotdot"),
		"../../victims/dotdot",
		filepath.Join(home, "out", "linked"),
		filepath.Join(home, "gone"), // already gone: not an error
	}})
	if err == nil {
		t.Fatal("Cleanup reported nothing about the paths outside its folder")
	}
	for _, p := range []string{outside, dotdot, linked, filepath.Join(victims, "target")} {
		if _, serr := os.Stat(p); serr != nil {
			t.Errorf("%s was removed (err %v); Cleanup said %v", p, serr, err)
		}
	}
	for _, p := range []string{inside, filepath.Join(home, "auth.json")} {
		if _, serr := os.Lstat(p); !os.IsNotExist(serr) {
			t.Errorf("%s inside the folder was not removed: %v", p, serr)
		}
	}

	// A folder that is itself a symbolic link is not followed.
	evil := filepath.Join(base, "project", ".cotal", "codex", "evil")
	if err := os.Symlink(victims, evil); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(connector.Spec{Dirs: []string{evil}, Remove: []string{filepath.Join(evil, "abs")}}); err == nil {
		t.Fatal("Cleanup followed a folder that is a symbolic link without a word")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("removed through a linked folder: %v", err)
	}
}
