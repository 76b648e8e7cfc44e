package login

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

// TestLoginFlags: the flags reach Options, and bad values are refused before anything runs.
func TestLoginFlags(t *testing.T) {
	o, err := cmdtest.Capture(NewCmdLogin, []string{"--idp", "https://idp.example.com/realms/team", "--client-id", "team", "--status"})
	if err != nil {
		t.Fatal(err)
	}
	if o.IdP != "https://idp.example.com/realms/team" || o.ClientID != "team" || !o.Status {
		t.Fatalf("options: %+v", o)
	}
	o, err = cmdtest.Capture(NewCmdLogin, []string{"--idp", "http://127.0.0.1:5556/dex"})
	if err != nil || o.ClientID != "" || o.Status {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--idp is required"},
		{[]string{"--idp", "http://idp.example.com"}, "http is only allowed on 127.0.0.1 or localhost"},
		{[]string{"--idp", "idp.example.com"}, "--idp"},
		{[]string{"--idp", "https://idp.example.com", "--client-id", ""}, "--client-id"},
	} {
		_, err := cmdtest.Capture(NewCmdLogin, c.args)
		var fe *cmdutil.FlagError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
	if _, err := cmdtest.Capture(NewCmdLogin, []string{"--idp", "https://idp.example.com", "extra"}); err == nil {
		t.Error("extra argument accepted")
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) wait(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return ctx.Err()
}

// TestLoginRun signs in against a test issuer, stores the session, and reports it.
func TestLoginRun(t *testing.T) {
	clk := &clock{t: testclock.Epoch(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{AutoApprove: "alice", Now: clk.Now})
	dir := filepath.Join(t.TempDir(), "logins")
	ios, _, out, errOut := iostreams.Test()
	opts := &Options{IO: ios, Dir: func() (string, error) { return dir, nil }, Now: clk.Now, Wait: clk.wait,
		IdP: iss.URL, ClientID: "cotal"}
	if err := runLogin(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), iss.URL+"/device?user_code=") || !strings.Contains(errOut.String(), "Waiting for approval") {
		t.Fatalf("stderr: %q", errOut.String())
	}
	if out.String() != "✓ logged in to "+iss.URL+" as alice\n" {
		t.Fatalf("stdout: %q", out.String())
	}
	p, err := devicelogin.Store{Dir: dir}.Path(iss.URL)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v, %v", fi, err)
	}
	tok, err := devicelogin.Token(t.Context(), devicelogin.Config{Issuer: iss.URL, Now: clk.Now}, devicelogin.Store{Dir: dir})
	if err != nil || tok == "" {
		t.Fatalf("IDToken: %v", err)
	}

	out.Reset()
	opts.Status = true
	if err := runLogin(t.Context(), opts); err != nil || !strings.Contains(out.String(), "as alice") || !strings.Contains(out.String(), "refreshable") {
		t.Fatalf("status: %q, %v", out.String(), err)
	}
	opts.IdP = "https://idp.example.com"
	var r *cmdutil.Refusal
	if err := runLogin(t.Context(), opts); !errors.As(err, &r) || r.Next != "cotal login --idp https://idp.example.com" {
		t.Fatalf("status without session: %v", err)
	}
}

func TestLoginRunDenied(t *testing.T) {
	clk := &clock{t: testclock.Epoch(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{Now: clk.Now})
	ios, _, out, _ := iostreams.Test()
	dir := t.TempDir()
	opts := &Options{IO: ios, Dir: func() (string, error) { return dir, nil }, Now: clk.Now, IdP: iss.URL, ClientID: "cotal",
		Wait: func(ctx context.Context, d time.Duration) error {
			for _, uc := range iss.PendingUserCodes() {
				if err := iss.Deny(uc); err != nil {
					return err
				}
			}
			return clk.wait(ctx, d)
		}}
	var r *cmdutil.Refusal
	if err := runLogin(t.Context(), opts); !errors.As(err, &r) || !strings.Contains(r.Why, "denied") {
		t.Fatalf("denied: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("stdout: %q", out.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a denied login stored %d files", len(entries))
	}
}
