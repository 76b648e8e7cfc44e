package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFind(t *testing.T) {
	base := t.TempDir()
	outer := filepath.Join(base, "outer")
	inner := filepath.Join(outer, "inner")
	deep := filepath.Join(inner, "a", "b", "c")
	fileDir := filepath.Join(outer, "filecotal")
	mkdirs(t, filepath.Join(outer, ".cotal"), filepath.Join(inner, ".cotal"), deep, fileDir)
	if err := os.WriteFile(filepath.Join(fileDir, ".cotal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		dir    string
		ignore []string
		want   string
	}{
		{"project root itself", outer, nil, outer},
		{"nested folder finds nearest", deep, nil, inner},
		{"unclean path", deep + "/../../..", nil, inner},
		{"a .cotal file is passed over", fileDir, nil, outer},
		{"ignored .cotal is passed over", deep, []string{filepath.Join(inner, ".cotal")}, outer},
		{"missing ignore path is harmless", deep, []string{filepath.Join(base, "nope")}, inner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Find(tt.dir, tt.ignore...)
			if err != nil {
				t.Fatalf("Find(%q): %v", tt.dir, err)
			}
			if p.Root != tt.want {
				t.Fatalf("Find(%q).Root = %q, want %q", tt.dir, p.Root, tt.want)
			}
		})
	}
}

func TestFindRelative(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "x", "y")
	mkdirs(t, filepath.Join(root, ".cotal"), deep)
	t.Chdir(deep)
	p, err := Find(".")
	if err != nil {
		t.Fatal(err)
	}
	if p.Root != root {
		t.Fatalf("Root = %q, want %q", p.Root, root)
	}
}

func TestFindNoProject(t *testing.T) {
	base := t.TempDir()
	for d := base; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, ".cotal")); err == nil && fi.IsDir() {
			t.Skipf("%s has a .cotal/ above the temp dir; cannot test the miss", d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	plain := filepath.Join(base, "plain", "x", "y")
	home := filepath.Join(base, "home")
	underHome := filepath.Join(home, "work", "proj")
	mkdirs(t, plain, underHome, filepath.Join(home, ".cotal"))
	tests := []struct {
		name   string
		dir    string
		ignore []string
	}{
		{"no .cotal anywhere", plain, nil},
		{"only an ignored .cotal (machine home)", underHome, []string{filepath.Join(home, ".cotal")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Find(tt.dir, tt.ignore...)
			if !errors.Is(err, ErrNoProject) {
				t.Fatalf("Find(%q) = %+v, %v; want ErrNoProject", tt.dir, p, err)
			}
			for _, want := range []string{"no .cotal/ found from " + tt.dir + " upward", "cotal up", "--server/--space"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestFindBadStart(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(base, "missing")} {
		if _, err := Find(dir); err == nil || errors.Is(err, ErrNoProject) {
			t.Errorf("Find(%q) err = %v, want a start-folder error", dir, err)
		}
	}
}

func TestOpen(t *testing.T) {
	root := t.TempDir()
	for i := range 2 { // the second Open finds what the first created
		p, err := Open(root)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		fi, err := os.Stat(p.Dir())
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("open %d: %s mode %v, want a 0700 directory", i, p.Dir(), fi.Mode())
		}
	}
	if p, err := Find(root); err != nil || p.Root != root {
		t.Fatalf("Find after Open = %+v, %v", p, err)
	}
}

func TestOpenRelative(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "proj"))
	t.Chdir(root)
	p, err := Open("proj")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "proj"); p.Root != want {
		t.Fatalf("Root = %q, want %q", p.Root, want)
	}
}

func TestOpenErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	cotalFile := filepath.Join(base, "cotalfile")
	mkdirs(t, cotalFile)
	for _, f := range []string{file, filepath.Join(cotalFile, ".cotal")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ name, root string }{
		{"root missing", filepath.Join(base, "missing")},
		{"root is a file", file},
		{".cotal is a file", cotalFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := Open(tt.root); err == nil {
				t.Fatalf("Open(%q) = %+v, want an error", tt.root, p)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created a missing root: %v", err)
	}
	// A .cotal that is a file is named, with what to do, from the folder and below it.
	if _, err := Open(cotalFile); !errors.Is(err, ErrControlFile) || !strings.Contains(err.Error(), "move it out of the way, then run cotal up in "+cotalFile) {
		t.Errorf("Open with a .cotal file: %v", err)
	}
	sub := filepath.Join(cotalFile, "sub")
	mkdirs(t, sub)
	if err := ControlFileFrom(sub); !errors.Is(err, ErrControlFile) || !strings.Contains(err.Error(), filepath.Join(cotalFile, ".cotal")) {
		t.Errorf("ControlFileFrom(%s) = %v", sub, err)
	}
	if err := ControlFileFrom(file + "-none"); err != nil {
		t.Errorf("ControlFileFrom with no .cotal file = %v", err)
	}
}

func TestPaths(t *testing.T) {
	p := &Project{Root: "/src/my app"}
	tests := []struct{ got, want string }{
		{p.Dir(), "/src/my app/.cotal"},
		{p.StoreDir(), "/src/my app/.cotal/nats"},
		{p.PidFile(), "/src/my app/.cotal/nats.pid"},
		{p.LogFile(), "/src/my app/.cotal/nats.log"},
		{p.MeshFile(), "/src/my app/.cotal/mesh.json"},
		{p.DefaultSpace(), "my_app"},
		{(&Project{Root: "/src/prod"}).DefaultSpace(), "prod"},
		{(&Project{Root: "/"}).DefaultSpace(), "_"},
	}
	for i, tt := range tests {
		if filepath.ToSlash(tt.got) != tt.want {
			t.Errorf("%d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

// TestFindProjectMachineHome pins the one way commands find their project: the machine
// home passed over is $COTAL_HOME (made absolute) when set, else $HOME/.cotal, both read
// through the getenv handed in (not the process's environment); with neither known,
// nothing is passed over.
func TestFindProjectMachineHome(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	work := filepath.Join(home, "work")
	other := filepath.Join(root, "other", ".cotal")
	mkdirs(t, filepath.Join(home, ".cotal"), work, other)
	t.Chdir(root)                                      // a relative $COTAL_HOME is taken from here
	t.Setenv("HOME", filepath.Join(root, "elsewhere")) // the process's HOME must not count
	tests := []struct {
		name string
		env  map[string]string
		want string // "" means no project
	}{
		{"HOME/.cotal is the machine home", map[string]string{"HOME": home}, ""},
		{"COTAL_HOME wins over HOME", map[string]string{"HOME": home, "COTAL_HOME": other}, home},
		{"COTAL_HOME names the machine home", map[string]string{"COTAL_HOME": filepath.Join(home, ".cotal")}, ""},
		{"relative COTAL_HOME is made absolute", map[string]string{"HOME": root, "COTAL_HOME": filepath.Join("home", ".cotal")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			p, err := FindProject(work, getenv)
			switch {
			case tt.want == "" && !errors.Is(err, ErrNoProject):
				t.Fatalf("FindProject = %+v, %v; want ErrNoProject", p, err)
			case tt.want != "" && (err != nil || p.Root != tt.want):
				t.Fatalf("FindProject = %+v, %v; want root %s", p, err, tt.want)
			}
		})
	}
	t.Run("no machine home passes nothing over", func(t *testing.T) {
		t.Setenv("HOME", "")
		p, err := FindProject(work, func(string) string { return "" })
		if err != nil || p.Root != home {
			t.Fatalf("FindProject = %+v, %v; want root %s", p, err, home)
		}
	})
}
