package authservice

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
)

// TestFlags: the flags reach Options, and bad values are refused before anything runs.
func TestFlags(t *testing.T) {
	o, err := cmdtest.Capture(NewCmdAuthService, []string{"--space", "team", "--server", "nats://127.0.0.1:1", "--port", "7420", "--auth-timeout", "3s",
		"--pidfile", "a.pid"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Space != "team" || o.Config.Server != "nats://127.0.0.1:1" || o.Config.Port != 7420 || o.Config.AuthTimeout != 3*time.Second || o.Pidfile != "a.pid" {
		t.Fatalf("options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdAuthService, []string{"--exchange-public-port", "7451", "--exchange-public-url", "https://auth.example.com/team",
		"--exchange-trusted-proxy", "--advertised-server", "wss://nats.example.com", "--agent-provisioning-url", "https://p.example.com", "--service-endpoints"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Public.Port != 7451 || o.Config.Public.URL != "https://auth.example.com/team" || !o.Config.Public.TrustedProxy ||
		o.Config.Public.AdvertisedServer != "wss://nats.example.com" || o.Config.Public.AgentProvisioningURL != "https://p.example.com" || !o.Config.ServiceEndpoints {
		t.Fatalf("public face options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdAuthService, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Port != 0 || o.Config.AuthTimeout != 2*time.Second {
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

// TestEmbedderFlagsMatch: authsvc.Run (the embedder's entry) parses with the flags of
// `cotal auth-service`: the command's flags are authsvc's table (plus --pidfile), with the
// same defaults, and a parse of nothing but what the embedder must name yields the
// command's defaults (--auth-timeout was 0 for the embedder, 2 s for the command).
func TestEmbedderFlagsMatch(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	cmd := NewCmdAuthService(&cmdutil.Factory{IO: ios}, nil)
	var c authsvc.Config
	table := flag.NewFlagSet("auth-service", flag.ContinueOnError)
	authsvc.RegisterFlags(table, &c)
	table.VisitAll(func(f *flag.Flag) {
		cf := cmd.Flags().Lookup(f.Name)
		switch {
		case cf == nil:
			t.Errorf("--%s: the embedder's flag is not the command's", f.Name)
		case cf.DefValue != f.DefValue:
			t.Errorf("--%s: default %q for the embedder, %q for the command", f.Name, f.DefValue, cf.DefValue)
		}
	})
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "pidfile" && f.Name != "help" && table.Lookup(f.Name) == nil {
			t.Errorf("--%s: the command's flag is not in authsvc's table, so the embedder lacks it", f.Name)
		}
	})

	o, err := cmdtest.Capture(NewCmdAuthService, nil)
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := authsvc.ParseArgs([]string{"--trust", "t", "--server", "nats://127.0.0.1:1", "--space", "team"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	embedded.TrustDir, embedded.Server, embedded.Space = "", "", "" // the command finds these in the project
	if !reflect.DeepEqual(embedded, o.Config) {
		t.Fatalf("embedder's defaults %+v, the command's %+v", embedded, o.Config)
	}
	if o.Config.AuthTimeout != authsvc.DefaultAuthTimeout {
		t.Fatalf("--auth-timeout default %s, want %s", o.Config.AuthTimeout, authsvc.DefaultAuthTimeout)
	}
}
