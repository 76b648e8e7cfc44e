package cmdutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestMeshFlagsSpace(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: ""},
		{args: []string{"--space", "prod"}, want: "prod"},
		{args: []string{"--space", "a-b_1"}, want: "a-b_1"},
		{args: []string{"--space", ""}, wantErr: "a space name is required"},
		{args: []string{"--space="}, wantErr: "a space name is required"},
		{args: []string{"--space", "a.b"}, wantErr: `invalid space name "a.b"`},
		{args: []string{"--space", "a b"}, wantErr: `invalid space name "a b"`},
	} {
		var m MeshFlags
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		m.Register(fs)
		err := fs.Parse(c.args)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil || m.Space != c.want {
			t.Errorf("%q: space %q, err %v; want %q", c.args, m.Space, err, c.want)
		}
	}
}

func TestResolveRefusesAnInvalidSpace(t *testing.T) {
	f := &Factory{Getwd: func() (string, error) { return t.TempDir(), nil }, Getenv: func(string) string { return "" }}
	_, err := f.Resolve(MeshFlags{Space: "a.b", Server: "nats://127.0.0.1:1"})
	var usage *FlagError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), `invalid space name "a.b"`) {
		t.Fatalf("err %v, want a usage error naming the space", err)
	}
}

func TestGroup(t *testing.T) {
	var out bytes.Buffer
	g := Group(&cobra.Command{Use: "things", Short: "Things"})
	g.AddCommand(&cobra.Command{Use: "list", RunE: func(*cobra.Command, []string) error { return nil }},
		&cobra.Command{Use: "add", RunE: func(*cobra.Command, []string) error { return nil }})
	root := &cobra.Command{Use: "cotal", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(g)
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"things"})
	var shown *HelpShown
	if err := root.Execute(); !errors.As(err, &shown) || err.Error() != "cotal things needs a command: add, list" || !strings.Contains(out.String(), "cotal things [command]") {
		t.Fatalf("alone: err %v, out %q; want its help, then a usage error", err, out.String())
	}
	root.SetArgs([]string{"things", "frob"})
	if err := root.Execute(); err == nil || err.Error() != `unknown command "frob" for "cotal things": use add, list` {
		t.Fatalf("unknown subcommand: err %v", err)
	}
}

func TestOutFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cotal.yaml")
	if err := os.WriteFile(path, []byte("space: demo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := OutFile{Path: path, Flag: "--out", Next: "cotal mint x --out " + path + " --force"}
	var r *Refusal
	if err := o.Check(); !errors.As(err, &r) || r.Next != o.Next {
		t.Fatalf("check of an existing file: %v, want a refusal naming --force", err)
	}
	if err := o.Write([]byte("creds"), 0o600); !errors.As(err, &r) {
		t.Fatalf("write over an existing file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "space: demo\n" {
		t.Fatalf("refused write changed the file: %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("refused write changed the mode: %v", st.Mode())
	}
	o.Force = true
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	if err := o.Write([]byte("creds"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("forced write: mode %v, want 0600", st.Mode())
	}
	fresh := OutFile{Path: filepath.Join(dir, "new.creds"), Flag: "--out"}
	if err := fresh.Check(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Write([]byte("creds"), 0o600); err != nil {
		t.Fatal(err)
	}
}
