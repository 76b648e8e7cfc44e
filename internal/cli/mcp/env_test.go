package mcp

import (
	"context"
	"slices"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// A launcher's COTAL_SUBSCRIBE set to "" (a persona whose read set is empty) joins no
// channel; unset, the agent joins none (DM-only: general is never implied); a --channel flag beats the variable.
func TestSubscribeFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"unset", map[string]string{}, nil, nil},
		{"empty", map[string]string{EnvSubscribe: ""}, nil, nil},
		{"list", map[string]string{EnvSubscribe: "general, team.backend"}, nil, []string{"general", "team.backend"}},
		{"flag wins", map[string]string{EnvSubscribe: "x"}, []string{"--channel", "y"}, []string{"y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			f := &cmdutil.Factory{Getenv: func(k string) string { return tc.env[k] }, LookupEnv: lookup}
			var got *Options
			cmd := NewCmdMCP(f, "test", func(_ context.Context, o *Options) error { got = o; return nil })
			cmd.SetArgs(append([]string{"--name", "a"}, tc.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Channels, tc.want) {
				t.Fatalf("channels %q, want %q", got.Channels, tc.want)
			}
		})
	}
}
