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
		"--idp", "https://idp.example.com/realms/team", "--client-id", "cotal-team"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Mesh.Space != "team" || o.Mesh.Server != "nats://127.0.0.1:1" || o.Port != 7420 || o.AuthTimeout != 3*time.Second ||
		o.IdP != "https://idp.example.com/realms/team" || o.ClientID != "cotal-team" {
		t.Fatalf("options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdAuthService, []string{"--idp", "http://127.0.0.1:5556/dex"})
	if err != nil {
		t.Fatal(err)
	}
	if o.IdP != "http://127.0.0.1:5556/dex" || o.ClientID != "cotal" {
		t.Fatalf("defaults: %+v", o)
	}
	idp := []string{"--idp", "https://idp.example.com"}
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{nil, "--idp"},
		{[]string{"--space", "team"}, "--idp"},
		{[]string{"--idp", "http://idp.example.com"}, "--idp"},
		{[]string{"--idp", "idp.example.com"}, "--idp"},
		{[]string{"--idp", "ftp://idp.example.com"}, "--idp"},
		{append([]string{"--client-id", ""}, idp...), "--client-id"},
		{append([]string{"--space", "no spaces"}, idp...), "--space"},
		{append([]string{"--port", "70000"}, idp...), "--port"},
		{append([]string{"--auth-timeout", "-1s"}, idp...), "--auth-timeout"},
		{append([]string{"extra"}, idp...), ""},
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
