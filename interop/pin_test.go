package interop

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/oidc"
	"github.com/cotal-ai/cotal/trust"
)

// pinFixture reads testdata/pin/<name>.
func pinFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pin", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pinSpace(t *testing.T) *trust.Chain {
	t.Helper()
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Space("u"); err != nil {
		t.Fatal(err)
	}
	return chain
}

// TestReferencePinRead: the idp.json a TypeScript `cotal up --user-auth --idp` wrote is
// read by Go as the reference's pin (the pinned verifier, the base URL for cotal login),
// and `cotal up --user-auth --idp <same URL>` keeps it byte for byte.
func TestReferencePinRead(t *testing.T) {
	chain := pinSpace(t)
	dir := authsvc.StateDir(chain.Dir(), "u")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ref := pinFixture(t, "idp.json")
	if err := os.WriteFile(filepath.Join(dir, authsvc.PinFile), ref, 0o600); err != nil {
		t.Fatal(err)
	}
	pin, err := authsvc.ReadPin(chain.Dir(), "u")
	if err != nil {
		t.Fatal(err)
	}
	if pin.OIDC() || pin.LoginURL() != "https://idp.example.com/api/auth" || pin.Issuer != "https://idp.example.com" {
		t.Fatalf("pin %+v", pin)
	}
	v, ok := pin.Verifier().(*oidc.PinnedVerifier)
	if !ok || v.Issuer != "https://idp.example.com" || v.Audience != "https://idp.example.com" || v.JWKSURI != "https://idp.example.com/api/auth/jwks" {
		t.Fatalf("verifier %#v", pin.Verifier())
	}
	if _, err := authsvc.Enable(chain, "u", "https://idp.example.com/api/auth/", ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, authsvc.PinFile)); string(b) != string(ref) {
		t.Fatalf("the reference's pin was rewritten:\n%s", b)
	}
}

// TestReferencePinWritten: the pin Go writes for `cotal up --user-auth --idp <base>`
// without --client-id is the reference's, field for field.
func TestReferencePinWritten(t *testing.T) {
	chain := pinSpace(t)
	if _, err := authsvc.Enable(chain, "u", "https://idp.example.com/api/auth/", ""); err != nil {
		t.Fatal(err)
	}
	got, want := decodeMap(t, must(os.ReadFile(filepath.Join(authsvc.StateDir(chain.Dir(), "u"), authsvc.PinFile)))), decodeMap(t, pinFixture(t, "idp.json"))
	if !maps.EqualFunc(got, want, func(a, b any) bool { return a == b }) {
		t.Fatalf("Go's pin %v, the reference's %v", got, want)
	}
}

// TestReferenceSessionsRead: the session cache the reference's `cotal login` keeps is read
// by Go, and Go writes the same shape.
func TestReferenceSessionsRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, devicelogin.RefSessionsFile), pinFixture(t, "idp-sessions.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := devicelogin.Store{Dir: dir}
	s, err := st.LoadRef("https://idp.example.com/api/auth/")
	if err != nil || s.Token != "opaque-session-token-from-better-auth" || s.ExpiresAt != 1796040000 || s.Sub != "user-7f3a" {
		t.Fatalf("session %+v %v", s, err)
	}
	if err := os.Remove(filepath.Join(dir, devicelogin.RefSessionsFile)); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveRef("https://idp.example.com/api/auth", s); err != nil {
		t.Fatal(err)
	}
	got, want := decodeMap(t, must(os.ReadFile(filepath.Join(dir, devicelogin.RefSessionsFile)))), decodeMap(t, pinFixture(t, "idp-sessions.json"))
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("Go's sessions file %s, the reference's %s", gb, wb)
	}
}

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
