package mcp

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// The reference's launch-material file (interop/testdata/launch/reference-material.json,
// core launch-material.ts) gives cotal mcp its servers and creds; what the reference's
// readMaterial and readLaunchMaterial refuse, cotal mcp refuses too, with what to do.
func TestLaunchMaterial(t *testing.T) {
	fixture, err := os.ReadFile("../../../interop/testdata/launch/reference-material.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parse := func(env map[string]string) (*Options, error) {
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		f := &cmdutil.Factory{Getenv: func(k string) string { return env[k] }, LookupEnv: lookup}
		var got *Options
		cmd := NewCmdMCP(f, "test", func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(nil)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		return got, cmd.Execute()
	}
	ok := write("material.json", string(fixture), 0o600)
	got, err := parse(map[string]string{"COTAL_LAUNCH_MATERIAL": ok, "COTAL_NAME": "dave"})
	if err != nil || got.Mesh.Server != "nats://127.0.0.1:4222" || got.Mesh.Creds != "/tmp/cotal-launch-x/agent.creds" {
		t.Fatalf("reference material: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"both carriers", map[string]string{"COTAL_LAUNCH_MATERIAL": ok, "COTAL_SERVERS": "nats://x:1"}, "both as COTAL_LAUNCH_MATERIAL and as COTAL_SERVERS"},
		{"readable by others", map[string]string{"COTAL_LAUNCH_MATERIAL": write("open.json", string(fixture), 0o644)}, "readable beyond its owner (mode 644)"},
		{"not an object", map[string]string{"COTAL_LAUNCH_MATERIAL": write("list.json", "[]", 0o600)}, "want a JSON object"},
		{"nothing recognised", map[string]string{"COTAL_LAUNCH_MATERIAL": write("empty.json", "{}", 0o600)}, "carries nothing this reader recognises"},
		{"empty field", map[string]string{"COTAL_LAUNCH_MATERIAL": write("blank.json", `{"servers":" "}`, 0o600)}, "servers is empty"},
		{"user mode in material", map[string]string{"COTAL_LAUNCH_MATERIAL": write("user.json", `{"servers":"nats://h:1","userAuth":{"owner":"u_a","actor":"a","sentinelCredsPath":"/s","bearerCmd":["x"]}}`, 0o600)}, "user-mode launch"},
		{"partial user mode", map[string]string{"COTAL_OWNER": "u_a", "COTAL_ACTOR": "a"}, "needs all of COTAL_OWNER"},
		{"bad uid", map[string]string{"COTAL_LIFECYCLE_UID": "NOPE"}, "COTAL_LIFECYCLE_UID=\"NOPE\""},
		{"subscribe outside the read ACL", map[string]string{"COTAL_SUBSCRIBE": "ops", "COTAL_ALLOW_SUBSCRIBE": "general"}, `subscribe channel "ops"`},
		{"quiet outside the read ACL", map[string]string{"COTAL_SUBSCRIBE": "general", "COTAL_QUIET": "ops"}, `COTAL_QUIET: channel "ops" is not within the read ACL`},
		{"quiet and muted", map[string]string{"COTAL_SUBSCRIBE": "general", "COTAL_QUIET": "general", "COTAL_MUTED": "general"}, "in both COTAL_QUIET and COTAL_MUTED"},
		{"kind", map[string]string{"COTAL_KIND": "human"}, "cotal mcp serves an agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["COTAL_NAME"] = "dave"
			if _, err := parse(tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal with %q", err, tc.want)
			}
		})
	}
	if err := checkCredsUID("aaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbb"); err == nil {
		t.Fatal("a COTAL_LIFECYCLE_UID other than the creds' was accepted")
	}
}

// A --name agent minted on a project's mesh gets exactly the ACLs its launcher named
// (COTAL_ALLOW_*, or an agent file's, empty ones included: a DM-only agent file never
// widens to every channel), and every channel only when none was named.
func TestNamedAgentACL(t *testing.T) {
	dir := t.TempDir()
	dmOnly := filepath.Join(dir, "quiet.md")
	if err := os.WriteFile(dmOnly, []byte("---\nname: quiet\n---\nYou review.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		read, pub []string
	}{
		{"none named", map[string]string{"COTAL_NAME": "a"}, []string{">"}, []string{">"}},
		{"env", map[string]string{"COTAL_NAME": "a", "COTAL_ALLOW_SUBSCRIBE": "general"}, []string{"general"}, []string{}},
		{"DM-only agent file", map[string]string{"COTAL_AGENT_FILE": dmOnly}, []string{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			f := &cmdutil.Factory{Getenv: func(k string) string { return tc.env[k] }, LookupEnv: lookup}
			var got *Options
			cmd := NewCmdMCP(f, "test", func(_ context.Context, o *Options) error { got = o; return nil })
			cmd.SetArgs(nil)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if r, p := got.acl(got.AllowSubscribe), got.acl(got.AllowPublish); !slices.Equal(r, tc.read) || !slices.Equal(p, tc.pub) {
				t.Fatalf("read %q post %q, want %q %q", r, p, tc.read, tc.pub)
			}
		})
	}
}
