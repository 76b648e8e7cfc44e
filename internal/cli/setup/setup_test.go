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

// options are run's Options rooted in a temp folder: HOME, XDG_CONFIG_HOME, COTAL_HOME and
// the current folder.
func options(t *testing.T, ios *iostreams.IOStreams) (*Options, string) {
	root := t.TempDir()
	env := map[string]string{"HOME": filepath.Join(root, "home"), "XDG_CONFIG_HOME": filepath.Join(root, "home", ".config"),
		"COTAL_HOME": filepath.Join(root, "home", ".cotal")}
	wd := filepath.Join(root, "proj")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &cmdutil.Factory{IO: ios, Getenv: func(k string) string { return env[k] }}
	return &Options{IO: ios, Getwd: func() (string, error) { return wd, nil }, Getenv: f.Getenv,
		ConfigHome: f.ConfigHome, MachineHome: f.MachineHome}, root
}

func TestSetupWritesThenShowsStatus(t *testing.T) {
	ios, _, out, _ := iostreams.Test()
	opts, root := options(t, ios)
	if err := runSetup(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	want := "→ wrote " + filepath.Join(root, "home", ".config", "cotal", "config.json") + "\n→ wrote " +
		filepath.Join(root, "proj", ".cotal", "agents", "default.md") + "\nnext: run `cotal up --detach`\n"
	if out.String() != want {
		t.Fatalf("first run:\n%s\nwant:\n%s", out, want)
	}
	out.Reset()
	if err := runSetup(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "cotal · status\n✓ config") || strings.Contains(out.String(), "wrote") {
		t.Fatalf("second run:\n%s", out)
	}
}

func TestSetupRefusesTheMachineHome(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	opts, root := options(t, ios)
	opts.Getwd = func() (string, error) { return filepath.Join(root, "home"), nil }
	if err := os.MkdirAll(filepath.Join(root, "home", ".cotal"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := runSetup(t.Context(), opts)
	if err == nil || !strings.Contains(err.Error(), "is the machine home") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "home", ".cotal", "agents")); !os.IsNotExist(err) {
		t.Fatal("setup wrote into the machine home")
	}
}
