package devicelogin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/oidc/oidctest"
)

func (f *flow) refConfig(p *oidctest.RefIdP, prompt func(Prompt)) RefConfig {
	c := f.config(&oidctest.Issuer{}, prompt)
	return RefConfig{URL: p.URL, Now: c.Now, Wait: c.Wait, Prompt: prompt}
}

// TestRefLogin: the reference's device flow (JSON bodies, client id cotal-cli) gives an
// opaque session whose subject comes from the ID token GET <base>/token returns; the
// session is kept in the reference's idp-sessions.json form and hands out fresh ID
// tokens until the IdP ends it, which asks for cotal login.
func TestRefLogin(t *testing.T) {
	f := &flow{clk: newClock(t)}
	p := oidctest.StartRef(t, &oidctest.RefIdP{Now: f.clk.Now})
	var shown Prompt
	s, err := RefLogin(t.Context(), f.refConfig(p, func(pr Prompt) {
		shown = pr
		if err := p.Approve(pr.UserCode, "alice-sub"); err != nil {
			t.Error(err)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if shown.UserCode == "" || s.Sub != "alice-sub" || s.Token == "" || s.ExpiresAt != f.clk.Now().Add(7*24*time.Hour).Unix() {
		t.Fatalf("session %+v, prompt %+v", s, shown)
	}
	dir := filepath.Join(t.TempDir(), "logins")
	st := Store{Dir: dir}
	if err := st.SaveRef(p.URL+"/", s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, RefSessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"token": s.Token, "expiresAt": float64(s.ExpiresAt), "sub": "alice-sub"}
	got, _ := file["sessions"].(map[string]any)[p.URL].(map[string]any)
	if file["ver"] != 1.0 || len(got) != 3 || got["token"] != want["token"] || got["expiresAt"] != want["expiresAt"] || got["sub"] != want["sub"] {
		t.Fatalf("sessions file %s", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, RefSessionsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("sessions file mode: %v %v", fi, err)
	}
	idt, err := RefIDToken(t.Context(), dir, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if sub, err := unverifiedSubject(idt); err != nil || sub != "alice-sub" {
		t.Fatalf("ID token sub %q %v", sub, err)
	}
	p.SignOutAll()
	if _, err := RefIDToken(t.Context(), dir, p.URL); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("after sign-out: %v, want ErrLoginRequired", err)
	}
	if _, err := RefIDToken(t.Context(), t.TempDir(), p.URL); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("no session: %v, want ErrLoginRequired", err)
	}
}

// TestRefLoginRefusals: a wrong client id, and a code that expires, end the login.
func TestRefLoginRefusals(t *testing.T) {
	f := &flow{clk: newClock(t)}
	p := oidctest.StartRef(t, &oidctest.RefIdP{Now: f.clk.Now, ClientID: "team"})
	if _, err := RefLogin(t.Context(), f.refConfig(p, nil)); err == nil {
		t.Fatal("wrong client id accepted")
	}
	q := oidctest.StartRef(t, &oidctest.RefIdP{Now: f.clk.Now, DeviceCodeTTL: 3 * time.Second})
	_, err := RefLogin(context.Background(), f.refConfig(q, nil))
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("unapproved: %v, want ErrExpired", err)
	}
}
