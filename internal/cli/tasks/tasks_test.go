package tasks

import (
	"context"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// TestNewCmdTasks: the flags and arguments of each subcommand become Options, and bad
// input is refused before anything dials.
func TestNewCmdTasks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want func(*Options) bool
		err  string
	}{
		{args: []string{"list"}, want: func(o *Options) bool { return o.Verb == "list" && o.Status == "" && !o.Mine }},
		{args: []string{"list", "--status", "any", "--role", "worker", "--mine", "--json"}, want: func(o *Options) bool {
			return o.Status == "any" && o.Role == "worker" && o.Mine && o.JSON
		}},
		{args: []string{"show", "abc123"}, want: func(o *Options) bool { return o.Verb == "show" && o.ID == "abc123" }},
		{args: []string{"create", "fix it", "--body", "b", "--role", "worker", "--assignee", "local.bob"}, want: func(o *Options) bool {
			return o.Title == "fix it" && o.Body == "b" && o.Role == "worker" && o.Assignee == "local.bob"
		}},
		{args: []string{"claim", "abc123"}, want: func(o *Options) bool { return o.Verb == "claim" && o.ID == "abc123" }},
		{args: []string{"done", "abc123", "--note", "merged"}, want: func(o *Options) bool { return o.Verb == "done" && o.Note == "merged" }},
		{args: []string{"claim", "ABC"}, err: `task id "ABC": want 1 to 32 of a-z 0-9`},
		{args: []string{"create", "a\nb"}, err: "title: want 1 to 200 characters on one line"},
		{args: []string{"create", "x", "--assignee", "bob"}, want: func(o *Options) bool { return o.Assignee == "bob" }},
		{args: []string{"create", "x", "--assignee", "bo\nb"}, err: "--assignee: name"},
		{args: []string{"list", "--status", "finished"}, err: `--status "finished": want any or one of`},
		{args: []string{"done", "abc", "--note", strings.Repeat("x", 2001)}, err: "--note is 2001 bytes"},
		{args: []string{"claim"}, err: "accepts 1 arg"},
	} {
		ios, _, _, _ := iostreams.Test()
		var got *Options
		cmd := NewCmdTasks(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		err := cmd.Execute()
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
		case tc.err == "" && (err != nil || got == nil || !tc.want(got)):
			t.Errorf("%q: opts %+v, err %v", tc.args, got, err)
		}
	}
}
