package clean

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// TestNewCmdClean: the flags give the Options each subcommand runs with, and bad input is
// a usage error before anything runs.
func TestNewCmdClean(t *testing.T) {
	tests := []struct {
		args    []string
		sub     string
		check   func(*Options) bool
		wantErr string
	}{
		{args: []string{"history", "--channel", "team.backend", "--yes"}, sub: "history",
			check: func(o *Options) bool { return o.Channel == "team.backend" && o.Yes && !o.Force && !o.DMs }},
		{args: []string{"history", "--dms", "--force", "-y", "--space", "review"}, sub: "history",
			check: func(o *Options) bool { return o.DMs && o.Force && o.Yes && o.Mesh.Space == "review" }},
		{args: []string{"store", "--store-dir", "/tmp/s", "--dry-run", "--json"}, sub: "store",
			check: func(o *Options) bool { return o.StoreDir == "/tmp/s" && o.DryRun && o.JSON }},
		{args: []string{"all", "--yes"}, sub: "all", check: func(o *Options) bool { return o.Yes }},
		{args: []string{"history", "--channel", "team.*"}, wantErr: "without wildcards"},
		{args: []string{"history", "--channel", ">"}, wantErr: "without wildcards"},
		{args: []string{"history", "--channel", "a b"}, wantErr: "--channel"},
		{args: []string{"store", "--dry-run", "--yes"}, wantErr: "exclude each other"},
		{args: []string{"store", "--channel", "x"}, wantErr: "unknown flag"},
		{args: []string{"restore-fallback"}, wantErr: "cotal keeps no restore fallback"},
		{args: []string{"restore-fallback", "--attempt", "x", "--force"}, wantErr: "cotal keeps no restore fallback"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			var gotSub string
			var got *Options
			cmd := NewCmdClean(&cmdutil.Factory{IO: ios}, func(_ context.Context, sub string, o *Options) error {
				gotSub, got = sub, o
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != nil {
					t.Fatalf("err %v (ran: %v), want %q", err, got != nil, tt.wantErr)
				}
				return
			}
			if err != nil || gotSub != tt.sub || !tt.check(got) {
				t.Fatalf("sub %q opts %+v err %v", gotSub, got, err)
			}
		})
	}
}

// TestConfirm: --yes skips the question; without a terminal it is a usage refusal naming
// --yes and the dry run of the same command.
func TestConfirm(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	o := &Options{IO: ios, Command: "cotal clean history", Channel: "general"}
	err := o.confirm("3 messages")
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "add --yes") || !strings.Contains(err.Error(), "cotal clean history --channel general --dry-run") {
		t.Fatalf("no terminal: %v", err)
	}
	o.Yes = true
	if err := o.confirm("3 messages"); err != nil {
		t.Fatalf("--yes: %v", err)
	}
}
