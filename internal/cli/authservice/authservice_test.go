package authservice

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// TestFlags: the flags reach Options, and bad values are refused before anything runs.
func TestFlags(t *testing.T) {
	o, err := cmdtest.Capture(NewCmdAuthService, []string{"--space", "team", "--server", "nats://127.0.0.1:1", "--port", "7420", "--auth-timeout", "3s",
		"--pidfile", "a.pid"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Mesh.Space != "team" || o.Mesh.Server != "nats://127.0.0.1:1" || o.Port != 7420 || o.AuthTimeout != 3*time.Second || o.Pidfile != "a.pid" {
		t.Fatalf("options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdAuthService, []string{"--exchange-public-port", "7451", "--exchange-public-url", "https://auth.example.com/team",
		"--exchange-trusted-proxy", "--advertised-server", "wss://nats.example.com", "--agent-provisioning-url", "https://p.example.com", "--service-endpoints"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Public.Port != 7451 || o.Public.URL != "https://auth.example.com/team" || !o.Public.TrustedProxy ||
		o.Public.AdvertisedServer != "wss://nats.example.com" || o.Public.AgentProvisioningURL != "https://p.example.com" || !o.Service {
		t.Fatalf("public face options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdAuthService, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 0 || o.AuthTimeout != 2*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--space", "no spaces"}, "--space"},
		{[]string{"--port", "70000"}, "--port"},
		{[]string{"--spaces", "m.json", "--space", "team"}, "--space does not go with --spaces: the manifest names the spaces"},
		{[]string{"--spaces", "m.json", "--pidfile", "p"}, "--pidfile does not go with --spaces"},
		{[]string{"--auth-timeout", "-1s"}, "--auth-timeout"},
		{[]string{"--idp", "https://idp.example.com"}, ""},
		{[]string{"--exchange-public-url", "https://auth.example.com"}, "--exchange-public-url"},
		{[]string{"--exchange-trusted-proxy"}, "--exchange-trusted-proxy"},
		{[]string{"--advertised-server", "tls://nats.example.com:4222"}, "--advertised-server"},
		{[]string{"--agent-provisioning-url", "https://p.example.com"}, "--agent-provisioning-url"},
		{[]string{"--exchange-public-port", "7451", "--exchange-public-url", "http://auth.example.com"}, "--exchange-public-url"},
		{[]string{"--exchange-public-port", "7451", "--agent-provisioning-url", "http://p.example.com"}, "--agent-provisioning-url"},
		{[]string{"--exchange-public-port", "7451", "--advertised-server", "https://nats.example.com"}, "--advertised-server"},
		{[]string{"--exchange-public-port", "70000"}, "--exchange-public-port"},
		{[]string{"extra"}, ""},
	} {
		_, err := cmdtest.Capture(NewCmdAuthService, c.args)
		if err == nil {
			t.Errorf("%v accepted", c.args)
			continue
		}
		if c.want == "" {
			continue
		}
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error naming %s", c.args, err, c.want)
		}
	}
}
