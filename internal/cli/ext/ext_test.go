package ext

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdExt(t *testing.T) {
	for _, c := range []struct {
		args []string
		run  string
		want Options
		err  string
	}{
		{args: []string{"add", "./cotal-x"}, run: "add", want: Options{Spec: "./cotal-x"}},
		{args: []string{"add", "--name", "x", "--first-party", "--reinstall", "--", "/opt/tool"}, run: "add",
			want: Options{Spec: "/opt/tool", Name: "x", FirstParty: true, Reinstall: true}},
		{args: []string{"add", "github.com/cotal-ai/cotal-web@v1.0.0"}, run: "add", want: Options{Spec: "github.com/cotal-ai/cotal-web@v1.0.0"}},
		{args: []string{"add"}, err: "accepts 1 arg"},
		{args: []string{"add", "a", "b"}, err: "accepts 1 arg"},
		{args: []string{"add", "--name", "Bad!", "./x"}, err: "--name: invalid extension name"},
		{args: []string{"rm", "x"}, run: "rm", want: Options{Name: "x"}},
		{args: []string{"remove", "x"}, run: "rm", want: Options{Name: "x"}},
		{args: []string{"rm"}, err: "accepts 1 arg"},
		{args: []string{"list"}, run: "list"},
		{args: []string{"ls", "--json"}, run: "list", want: Options{JSON: true}},
		{args: []string{"list", "x"}, err: "unknown command"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		var ran string
		root := &cobra.Command{Use: "cotal"}
		root.AddCommand(&cobra.Command{Use: "up", Run: func(*cobra.Command, []string) {}})
		cmd := NewCmdExt(&cmdutil.Factory{IO: ios}, func(_ context.Context, name string, o *Options) error {
			got, ran = o, name
			return nil
		})
		root.AddCommand(cmd)
		root.SetArgs(append([]string{"ext"}, c.args...))
		root.SetOut(ios.Out)
		root.SetErr(ios.ErrOut)
		err := root.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || ran != c.run {
			t.Errorf("%q: ran %q, err %v", c.args, ran, err)
			continue
		}
		if got.Spec != c.want.Spec || got.Name != c.want.Name || got.FirstParty != c.want.FirstParty ||
			got.Reinstall != c.want.Reinstall || got.JSON != c.want.JSON {
			t.Errorf("%q: options %+v, want %+v", c.args, *got, c.want)
		}
		if ran == "add" && (got.Reserved == nil || !got.Reserved("up") || !got.Reserved("help") || got.Reserved("hello")) {
			t.Errorf("%q: reserved names wrong", c.args)
		}
	}
}

func TestNameFlagIsAFlagError(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	cmd := NewCmdExt(&cmdutil.Factory{IO: ios}, func(context.Context, string, *Options) error { return nil })
	cmd.SetArgs([]string{"add", "--name", "UP", "./x"})
	var fe *cmdutil.FlagError
	if err := cmd.Execute(); !errors.As(err, &fe) {
		t.Fatalf("want a flag error, got %v", err)
	}
}
