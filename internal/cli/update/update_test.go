package update

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdUpdate(t *testing.T) {
	for _, c := range []struct {
		args []string
		want Options
		err  string
	}{
		{args: nil, want: Options{CLIVersion: "v1.2.3"}},
		{args: []string{"--reinstall"}, want: Options{Reinstall: true, CLIVersion: "v1.2.3"}},
		{args: []string{"--self", "--from", "./new"}, want: Options{Self: true, From: "./new", CLIVersion: "v1.2.3"}},
		{args: []string{"--self"}, err: "--self needs --from"},
		{args: []string{"--from", "./new"}, err: "--from names the binary for --self"},
		{args: []string{"--self", "--from", "x", "--reinstall"}, err: "two runs"},
		{args: []string{"extra"}, err: "unknown command"},
		{args: []string{"--self", "--from", "c.tar.gz", "--checksums", "SUMS"}, want: Options{Self: true, From: "c.tar.gz", Checksums: "SUMS", CLIVersion: "v1.2.3"}},
		{args: []string{"--self", "--from", "c.tar.gz"}, err: "is a release archive: add --checksums"},
		{args: []string{"--self", "--from", "c.zip"}, err: "is a release archive: add --checksums"},
		{args: []string{"--checksums", "SUMS"}, err: "--checksums checks the file --from names"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		root := &cobra.Command{Use: "cotal", Version: "v1.2.3"}
		root.AddCommand(NewCmdUpdate(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error {
			got = o
			return nil
		}))
		root.SetArgs(append([]string{"update"}, c.args...))
		root.SetOut(ios.Out)
		root.SetErr(ios.ErrOut)
		err := root.Execute()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			var fe *cmdutil.FlagError
			if strings.HasPrefix(c.err, "--") && !errors.As(err, &fe) {
				t.Errorf("%q: %v is not a flag error", c.args, err)
			}
			continue
		}
		if err != nil || got.Self != c.want.Self || got.From != c.want.From || got.Checksums != c.want.Checksums || got.Reinstall != c.want.Reinstall || got.CLIVersion != c.want.CLIVersion {
			t.Errorf("%q: options %+v, err %v; want %+v", c.args, got, err, c.want)
		}
	}
}
