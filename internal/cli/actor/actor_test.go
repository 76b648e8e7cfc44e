package actor

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

func TestNewCmdActor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		refused bool
		check   func(*Options) bool
	}{
		{"grant", []string{"grant", "alice", "--sub", "s1", "--sub", "s2", "--scope", "spawn,role:default", "--allow-subscribe", "team.>", "--label", "A"}, false,
			func(o *Options) bool {
				return o.Op == OpGrant && o.Row.Actor == "alice" && slices.Equal(o.Row.Subjects, []string{"s1", "s2"}) &&
					slices.Equal(o.Row.Scopes, []string{"spawn", "role:default"}) && slices.Equal(o.Row.AllowSubscribe, []string{"team.>"}) && o.Row.Label == "A"
			}},
		{"grant without sub", []string{"grant", "alice", "--scope", "spawn"}, true, nil},
		{"grant of nothing", []string{"grant", "alice", "--sub", "s", "--allow-subscribe", ""}, true, nil},
		{"grant of nothing by default (no implicit general)", []string{"grant", "alice", "--sub", "s"}, true, nil},
		{"grant reads no channel by default", []string{"grant", "alice", "--sub", "s", "--scope", "spawn"}, false,
			func(o *Options) bool { return o.Row.AllowSubscribe != nil && len(o.Row.AllowSubscribe) == 0 }},
		{"grant of no channel to read", []string{"grant", "alice", "--sub", "s", "--scope", "spawn", "--allow-subscribe", ""}, false,
			func(o *Options) bool { return o.Row.AllowSubscribe != nil && len(o.Row.AllowSubscribe) == 0 }},
		{"grant empty among channels", []string{"grant", "alice", "--sub", "s", "--allow-subscribe", "", "--allow-subscribe", "general"}, true, nil},
		{"grant bad scope", []string{"grant", "alice", "--sub", "s", "--scope", "root"}, true, nil},
		{"grant bad channel", []string{"grant", "alice", "--sub", "s", "--allow-publish", "a/b"}, true, nil},
		{"grant bad actor", []string{"grant", "a.b", "--sub", "s", "--scope", "spawn"}, true, nil},
		{"revoke", []string{"revoke", "alice"}, false, func(o *Options) bool { return o.Op == OpRevoke && o.Row.Actor == "alice" && len(o.Row.Subjects) == 0 }},
		{"revoke sub", []string{"revoke", "alice", "--sub", "s"}, false, func(o *Options) bool { return slices.Equal(o.Row.Subjects, []string{"s"}) }},
		{"revoke empty sub", []string{"revoke", "alice", "--sub", ""}, true, nil},
		{"revoke bad actor", []string{"revoke", "a-b"}, true, nil},
		{"list", []string{"list", "--json"}, false, func(o *Options) bool { return o.Op == OpList && o.JSON }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Options
			ios, _, _, _ := iostreams.Test()
			cmd := NewCmdActor(&cmdutil.Factory{IO: ios}, func(_ context.Context, o *Options) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			var r *cmdutil.Refusal
			var usage *cmdutil.FlagError
			if tc.refused {
				if !errors.As(err, &r) || !errors.As(err, &usage) || got != nil {
					t.Fatalf("err %v, opts %+v: want a refusal that is a usage error, before run", err, got)
				}
				return
			}
			if err != nil || got == nil || !tc.check(got) {
				t.Fatalf("opts %+v, err %v", got, err)
			}
		})
	}
}
