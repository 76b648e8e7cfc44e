// Package cmdtest runs a command's flag parsing in tests, with buffers for its streams.
package cmdtest

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// Capture builds a command with newCmd, passing a runF that records the Options, runs it
// with args, and returns the Options run would have received (nil when flags were refused)
// and the error.
func Capture[O any](newCmd func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command, args []string) (*O, error) {
	ios, _, _, _ := iostreams.Test()
	var got *O
	cmd := newCmd(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *O) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	err := cmd.Execute()
	return got, err
}

// Parsed checks one case of a Capture table: with wantErr, that the error contains it and
// run was not reached; without, that there is no error. It reports whether the options
// run received are left to compare.
func Parsed(t testing.TB, err error, reached bool, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err %v, want %q", err, wantErr)
		}
		if reached {
			t.Fatal("run was reached despite the error")
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
