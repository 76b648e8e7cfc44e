package setup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdSetup(t *testing.T) {
	for _, c := range []struct {
		args []string
		yes  bool
		err  string
	}{
		{args: nil},
		{args: []string{"--yes"}, yes: true},
		{args: []string{"-y"}, yes: true},
		{args: []string{"now"}, err: "unknown command"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmdSetup(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || got.Yes != c.yes {
			t.Errorf("%q: %+v %v", c.args, got, err)
		}
	}
}

// factory is a Factory rooted in a temp folder: HOME, XDG_CONFIG_HOME, COTAL_HOME and the
// current folder.
func factory(t *testing.T, ios *iostreams.IOStreams) (*cmdutil.Factory, string) {
	root := t.TempDir()
	env := map[string]string{"HOME": filepath.Join(root, "home"), "XDG_CONFIG_HOME": filepath.Join(root, "home", ".config"),
		"COTAL_HOME": filepath.Join(root, "home", ".cotal")}
	wd := filepath.Join(root, "proj")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	return &cmdutil.Factory{IO: ios, Getenv: func(k string) string { return env[k] }, Getwd: func() (string, error) { return wd, nil },
		Executable: os.Executable}, root
}

func TestSetupWritesThenShowsStatus(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	f, root := factory(t, ios)
	if err := runSetup(t.Context(), &Options{IO: ios, Factory: f}); err != nil {
		t.Fatal(err)
	}
	want := "→ wrote " + filepath.Join(root, "home", ".config", "cotal", "config.json") + "\n→ wrote " +
		filepath.Join(root, "proj", ".cotal", "agents", "default.md") + "\nnext: cotal up --detach\n"
	if out.String() != want {
		t.Fatalf("first run:\n%s\nwant:\n%s", out, want)
	}
	out.Reset()
	if err := runSetup(t.Context(), &Options{IO: ios, Factory: f}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "cotal · status\n✓ config") || strings.Contains(out.String(), "wrote") {
		t.Fatalf("second run:\n%s", out)
	}
}

func TestSetupRefusesTheMachineHome(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	f, root := factory(t, ios)
	f.Getwd = func() (string, error) { return filepath.Join(root, "home"), nil }
	if err := os.MkdirAll(filepath.Join(root, "home", ".cotal"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := runSetup(t.Context(), &Options{IO: ios, Factory: f})
	if err == nil || !strings.Contains(err.Error(), "is the machine home") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "home", ".cotal", "agents")); !os.IsNotExist(err) {
		t.Fatal("setup wrote into the machine home")
	}
}
