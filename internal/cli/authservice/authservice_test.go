package authservice

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
)

// TestFlags: the flags reach Options, and bad values are refused before anything runs.
func TestFlags(t *testing.T) {
	o, err := cmdtest.Capture(NewCmdAuthService, []string{"--space", "team", "--server", "nats://127.0.0.1:1", "--port", "7420", "--auth-timeout", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Mesh.Space != "team" || o.Mesh.Server != "nats://127.0.0.1:1" || o.Port != 7420 || o.AuthTimeout != 3*time.Second {
		t.Fatalf("options: %+v", o)
	}
	for _, args := range [][]string{
		{"--space", "no spaces"},
		{"--port", "70000"},
		{"--auth-timeout", "-1s"},
		{"extra"},
	} {
		if _, err := cmdtest.Capture(NewCmdAuthService, args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
