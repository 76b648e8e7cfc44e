package devicelogin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/oidc/oidctest"
)

// TestRefSignOut: POST <base>/sign-out ends the session at the IdP (its ID tokens stop);
// a session the IdP no longer knows is reported as not ended, not as an error; an IdP
// that cannot be reached is an error.
func TestRefSignOut(t *testing.T) {
	f := &flow{clk: newClock(t)}
	p := oidctest.StartRef(t, &oidctest.RefIdP{Now: f.clk.Now})
	s, err := RefLogin(t.Context(), f.refConfig(p, func(pr Prompt) {
		if err := p.Approve(pr.UserCode, "alice-sub"); err != nil {
			t.Error(err)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := RefConfig{URL: p.URL}
	if _, err := RefFetchIDToken(t.Context(), cfg, s.Token); err != nil {
		t.Fatalf("before sign-out: %v", err)
	}
	if ended, err := RefSignOut(t.Context(), cfg, s.Token); err != nil || !ended {
		t.Fatalf("sign out: ended %v, %v", ended, err)
	}
	if _, err := RefFetchIDToken(t.Context(), cfg, s.Token); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("after sign-out: %v, want ErrLoginRequired", err)
	}
	if ended, err := RefSignOut(t.Context(), cfg, s.Token); err != nil || ended {
		t.Fatalf("second sign out: ended %v, %v; want false, nil", ended, err)
	}
	if _, err := RefSignOut(t.Context(), RefConfig{URL: "http://127.0.0.1:1/api/auth"}, s.Token); err == nil {
		t.Fatal("sign out at a closed port: no error")
	}
}

// TestStoreRemove: List names every kept session (never a token), RemoveRef forgets one
// reference session and keeps the others, RemoveAll empties the folder of sessions.
func TestStoreRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logins")
	st := Store{Dir: dir}
	if k, err := st.List(); err != nil || len(k) != 0 {
		t.Fatalf("empty store: %v %v", k, err)
	}
	for _, u := range []string{"http://127.0.0.1:7001/api/auth", "http://127.0.0.1:7002/api/auth"} {
		if err := st.SaveRef(u, &RefSession{Token: "tok-" + u, ExpiresAt: 1, Sub: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Save(&Session{Issuer: "http://127.0.0.1:7003", ClientID: "cotal", Subject: "bob", IDToken: "x.y.z"}); err != nil {
		t.Fatal(err)
	}
	kept, err := st.List()
	if err != nil || len(kept) != 3 {
		t.Fatalf("list: %+v %v", kept, err)
	}
	if kept[0].IdP != "http://127.0.0.1:7001/api/auth" || kept[0].Kind != "reference" || kept[2].Kind != "oidc" || kept[2].Sub != "bob" {
		t.Fatalf("list: %+v", kept)
	}
	if ok, err := st.RemoveRef("http://127.0.0.1:7001/api/auth/"); err != nil || !ok {
		t.Fatalf("remove ref: %v %v", ok, err)
	}
	if _, err := st.LoadRef("http://127.0.0.1:7001/api/auth"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("removed session: %v", err)
	}
	if _, err := st.LoadRef("http://127.0.0.1:7002/api/auth"); err != nil {
		t.Fatalf("other session: %v", err)
	}
	if ok, err := st.RemoveRef("http://127.0.0.1:7001/api/auth"); err != nil || ok {
		t.Fatalf("remove again: %v %v", ok, err)
	}
	if err := st.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("after RemoveAll: %v %v", entries, err)
	}
}
