package interop

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/protocol"
)

// The environment a launched agent's MCP server gets (testdata/launch/mcp-env.json),
// checked both ways: Go's launcher encodes exactly the fixture, and the fixture carries
// every name the reference's configFromEnv (connector-core config.ts) needs to bring a
// static-creds agent up, in the shape it reads (comma lists, a valid lifecycle uid, kind
// agent), with the read set inside the read ACL as configFromEnv requires.
func TestLaunchEnvFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/launch/mcp-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	l := connector.Launch{Space: "main", Name: "dave", Role: "builder", Servers: "nats://127.0.0.1:4222",
		CredsPath: "/p/.cotal/run/dave/creds", Subscribe: []string{"general"},
		AllowSubscribe: []string{"general", "team.>"}, AllowPublish: []string{"general"}, Quiet: []string{"team.noise"},
		LifecycleUID: "0123456789abcdefghijklmnop", AgentFile: "/p/.cotal/agents/dave.md"}
	if got := l.MCPEnv("command"); !maps.Equal(got, fx.Env) {
		t.Fatalf("MCPEnv:\n%v\nfixture:\n%v", got, fx.Env)
	}
	// What configFromEnv needs for an authenticated launch: an identity, the creds, and the
	// lifecycle uid beside them.
	for _, k := range []string{"COTAL_NAME", "COTAL_SPACE", "COTAL_SERVERS", "COTAL_CREDS", "COTAL_LIFECYCLE_UID"} {
		if fx.Env[k] == "" {
			t.Errorf("%s is missing: the reference's configFromEnv needs it", k)
		}
	}
	if !protocol.ValidLifecycleUID(fx.Env["COTAL_LIFECYCLE_UID"]) || fx.Env["COTAL_KIND"] != "agent" {
		t.Fatalf("uid %q kind %q", fx.Env["COTAL_LIFECYCLE_UID"], fx.Env["COTAL_KIND"])
	}
	read := strings.Split(fx.Env["COTAL_ALLOW_SUBSCRIBE"], ",")
	for _, ch := range append(strings.Split(fx.Env["COTAL_SUBSCRIBE"], ","), strings.Split(fx.Env["COTAL_QUIET"], ",")...) {
		if !protocol.ChannelCovered(read, ch) {
			t.Errorf("%q is outside the read ACL %v: configFromEnv refuses it", ch, read)
		}
	}
}
