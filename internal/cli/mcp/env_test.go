package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// The launch env of interop/testdata/launch/mcp-env.json (the names the reference's
// connector-core config.ts configFromEnv reads) is what cotal mcp takes: its agent file
// (here a real one), ACLs, quiet list and lifecycle uid.
func TestReferenceLaunchEnv(t *testing.T) {
	b, err := os.ReadFile("../../../interop/testdata/launch/mcp-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	agentFile := filepath.Join(t.TempDir(), "dave.md")
	if err := os.WriteFile(agentFile, []byte("---\nname: dave\nrole: builder\nsubscribe: [general]\n---\nYou build.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fx.Env["COTAL_AGENT_FILE"] = agentFile
	lookup := func(k string) (string, bool) { v, ok := fx.Env[k]; return v, ok }
	f := &cmdutil.Factory{Getenv: func(k string) string { return fx.Env[k] }, LookupEnv: lookup}
	var got *Options
	cmd := NewCmdMCP(f, "test", func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Name != "dave" || got.Role != "builder" || got.Mesh.Creds != "/p/.cotal/run/dave/creds" || !slices.Equal(got.Channels, []string{"general"}) ||
		!slices.Equal(got.AllowSubscribe, []string{"general", "team.>"}) || !slices.Equal(got.AllowPublish, []string{"general"}) ||
		got.LifecycleUID != "0123456789abcdefghijklmnop" {
		t.Fatalf("options %+v", got)
	}
	// Go's alias beside the reference's name, disagreeing, is refused.
	fx.Env["COTAL_PERSONA"] = "other"
	cmd = NewCmdMCP(f, "test", func(context.Context, *Options) error { return nil })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `names persona "dave" but COTAL_PERSONA`) {
		t.Fatalf("disagreeing COTAL_PERSONA: %v", err)
	}
}
