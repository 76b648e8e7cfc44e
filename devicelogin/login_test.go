package devicelogin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

func newClock(t testing.TB) *oidctest.Clock {
	return oidctest.NewClock(testclock.Epoch(t))
}

// flow is a Config whose Wait advances clk instead of sleeping and records each wait.
type flow struct {
	clk   *oidctest.Clock
	waits []time.Duration
	short time.Duration // subtracted from the next wait, to poll too early once
}

func (f *flow) config(iss *oidctest.Issuer, prompt func(Prompt)) Config {
	return Config{Issuer: iss.URL, Now: f.clk.Now, Prompt: prompt,
		Wait: func(ctx context.Context, d time.Duration) error {
			f.waits = append(f.waits, d)
			f.clk.Add(d - f.short)
			f.short = 0
			return ctx.Err()
		}}
}

func TestLoginApproved(t *testing.T) {
	f := &flow{clk: newClock(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{Interval: 3 * time.Second, Now: f.clk.Now})
	var shown Prompt
	s, err := Login(t.Context(), f.config(iss, func(p Prompt) {
		shown = p
		if err := iss.Approve(p.UserCode, "alice"); err != nil {
			t.Error(err)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if shown.VerificationURI != iss.URL+oidctest.PathVerify || !strings.Contains(shown.VerificationURIComplete, shown.UserCode) || shown.ExpiresIn != 10*time.Minute {
		t.Fatalf("prompt %+v", shown)
	}
	if s.Issuer != iss.URL || s.ClientID != "cotal" || s.Subject != "alice" || s.IDToken == "" || s.RefreshToken == "" ||
		!s.Expiry.Equal(f.clk.Now().Add(time.Hour)) {
		t.Fatalf("session %+v", s)
	}
	if len(f.waits) != 1 || f.waits[0] != 3*time.Second {
		t.Fatalf("waits %v, want [3s]", f.waits)
	}
}

func TestLoginPendingThenApproved(t *testing.T) {
	f := &flow{clk: newClock(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{AutoApprove: "bob", Now: f.clk.Now})
	s, err := Login(t.Context(), f.config(iss, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Subject != "bob" || len(f.waits) != 2 || f.waits[1] != time.Second {
		t.Fatalf("session %+v after waits %v", s, f.waits)
	}
}

// TestLoginSlowDown: polling early gets slow_down, and the client adds 5 s to its interval.
func TestLoginSlowDown(t *testing.T) {
	f := &flow{clk: newClock(t), short: 500 * time.Millisecond}
	iss := oidctest.Start(t, &oidctest.Issuer{AutoApprove: "carol", Interval: 2 * time.Second, Now: f.clk.Now})
	s, err := Login(t.Context(), f.config(iss, nil))
	if err != nil {
		t.Fatal(err)
	}
	// early poll: slow_down (2s -> 7s); then pending; then approved
	if s.Subject != "carol" || len(f.waits) != 3 || f.waits[0] != 2*time.Second || f.waits[1] != 7*time.Second || f.waits[2] != 7*time.Second {
		t.Fatalf("session %+v after waits %v", s, f.waits)
	}
}

func TestLoginDenied(t *testing.T) {
	f := &flow{clk: newClock(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{Now: f.clk.Now})
	_, err := Login(t.Context(), f.config(iss, func(p Prompt) {
		if err := iss.Deny(p.UserCode); err != nil {
			t.Error(err)
		}
	}))
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("got %v", err)
	}
}

func TestLoginExpired(t *testing.T) {
	// The client notices the deadline itself ...
	f := &flow{clk: newClock(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{DeviceCodeTTL: 10 * time.Second, Now: f.clk.Now})
	_, err := Login(t.Context(), f.config(iss, func(Prompt) { f.clk.Add(10 * time.Second) }))
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("client-side expiry: %v", err)
	}
	// ... and believes the provider when its clock runs ahead.
	idpClk := newClock(t)
	iss = oidctest.Start(t, &oidctest.Issuer{DeviceCodeTTL: 10 * time.Second, Now: idpClk.Now})
	_, err = Login(t.Context(), f.config(iss, func(Prompt) { idpClk.Add(time.Minute) }))
	if !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "expired_token") {
		t.Fatalf("provider-side expiry: %v", err)
	}
}

func TestLoginRefused(t *testing.T) {
	iss := oidctest.Start(t, &oidctest.Issuer{ClientID: "other"})
	if _, err := Login(t.Context(), Config{Issuer: iss.URL}); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("wrong client id: %v", err)
	}
	if _, err := Login(t.Context(), Config{Issuer: "http://idp.example.com"}); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("plain http issuer: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	_, err := Login(ctx, Config{Issuer: iss.URL, ClientID: "other", Prompt: func(Prompt) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestLoginRequiredToken(t *testing.T) {
	dir := t.TempDir()
	_, err := IDToken(t.Context(), dir, "https://idp.example.com", "")
	if !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "run `cotal login --idp https://idp.example.com`") {
		t.Fatalf("no session: %v", err)
	}
	_, err = IDToken(t.Context(), dir, "https://idp.example.com", "team")
	if !strings.Contains(err.Error(), "run `cotal login --idp https://idp.example.com --client-id team`") {
		t.Fatalf("no session, other client: %v", err)
	}
}

// TestLoginTokenRefresh: Token serves the cached ID token while it is fresh, refreshes it
// within RefreshMargin of expiry (saving the rotated refresh token), and sends the person
// to cotal login once the provider refuses the refresh token.
// loggedIn logs dave in at a fresh issuer whose ID tokens live 5 minutes and saves the
// session in a fresh store.
func loggedIn(t *testing.T) (*flow, *oidctest.Issuer, Config, *Session, Store) {
	t.Helper()
	f := &flow{clk: newClock(t)}
	iss := oidctest.Start(t, &oidctest.Issuer{AutoApprove: "dave", TokenTTL: 5 * time.Minute, Now: f.clk.Now})
	cfg := f.config(iss, nil)
	s, err := Login(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := Store{Dir: filepath.Join(t.TempDir(), "logins")}
	if err := st.Save(s); err != nil {
		t.Fatal(err)
	}
	return f, iss, cfg, s, st
}

func TestLoginTokenRefresh(t *testing.T) {
	f, iss, cfg, s, st := loggedIn(t)
	tok, err := Token(t.Context(), cfg, st)
	if err != nil || tok != s.IDToken || iss.Refreshes() != 0 {
		t.Fatalf("fresh token: refreshed %d times, err %v", iss.Refreshes(), err)
	}
	f.clk.Add(4*time.Minute + 30*time.Second)
	tok, err = Token(t.Context(), cfg, st)
	if err != nil || tok == s.IDToken || iss.Refreshes() != 1 {
		t.Fatalf("near expiry: refreshed %d times, err %v", iss.Refreshes(), err)
	}
	saved, err := st.Load(iss.URL)
	if err != nil || saved.IDToken != tok || saved.RefreshToken == s.RefreshToken || saved.Subject != "dave" {
		t.Fatalf("saved %+v, err %v", saved, err)
	}
	if tok2, err := Token(t.Context(), cfg, st); err != nil || tok2 != tok || iss.Refreshes() != 1 {
		t.Fatalf("second call refreshed again: %d, %v", iss.Refreshes(), err)
	}
	f.clk.Add(5 * time.Minute)
	iss.Revoke("dave")
	_, err = Token(t.Context(), cfg, st)
	if !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "invalid_grant") ||
		!strings.Contains(err.Error(), "run `cotal login --idp "+iss.URL+"`") {
		t.Fatalf("revoked: %v", err)
	}
	cfg.ClientID = "team"
	if _, err := Token(t.Context(), cfg, st); !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), `client id "cotal"`) {
		t.Fatalf("other client id: %v", err)
	}
}

// TestLoginTokenConcurrentRefresh: callers that find the token near expiry at once refresh
// it once between them (the provider rotates refresh tokens, so a second refresh with the
// spent one would be refused) and all get the refreshed token.
func TestLoginTokenConcurrentRefresh(t *testing.T) {
	f, iss, cfg, s, st := loggedIn(t)
	f.clk.Add(4*time.Minute + 30*time.Second)
	const callers = 8
	tokens := make(chan string, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			tok, err := Token(t.Context(), cfg, st)
			tokens <- tok
			errs <- err
		})
	}
	wg.Wait()
	close(tokens)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for tok := range tokens {
		seen[tok] = true
	}
	if len(seen) != 1 || seen[s.IDToken] || iss.Refreshes() != 1 {
		t.Fatalf("%d distinct tokens (the stale one among them: %v), %d refreshes; want one refreshed token from one refresh", len(seen), seen[s.IDToken], iss.Refreshes())
	}
}

func TestLoginStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg", "logins")
	st := Store{Dir: dir}
	s := &Session{Issuer: "https://IdP.example.com:443/realm/", ClientID: "cotal", Subject: "eve", IDToken: "x.y.z", Expiry: time.Unix(1, 0).UTC()}
	if err := st.Save(s); err != nil {
		t.Fatal(err)
	}
	p, err := st.Path("https://idp.example.com/realm")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file %v, %v", fi, err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("folder %v, %v", di, err)
	}
	got, err := st.Load("https://idp.example.com/realm")
	if err != nil || *got != *s {
		t.Fatalf("load %+v, %v", got, err)
	}
	if _, err := st.Load("https://idp.example.com/other"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("other issuer: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d files (temp files left?)", len(entries))
	}
	if err := st.Remove(s.Issuer); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(s.Issuer); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after remove: %v", err)
	}
}

func TestLoginNormalizeIssuer(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://idp.example.com", "https://idp.example.com"},
		{"HTTPS://IDP.Example.com:443/", "https://idp.example.com"},
		{"https://idp.example.com:8443/realms/x//", "https://idp.example.com:8443/realms/x"},
		{"http://127.0.0.1:5556/dex", "http://127.0.0.1:5556/dex"},
		{"http://localhost:80/", "http://localhost"},
		{"http://idp.example.com", ""},
		{"https://idp.example.com?a=1", ""},
	} {
		got, err := NormalizeIssuer(c.in)
		if (err == nil) != (c.want != "") || got != c.want {
			t.Errorf("NormalizeIssuer(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
