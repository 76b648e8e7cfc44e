package authsvc

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/oidc"
	"github.com/cotal-ai/cotal/trust"
)

// pinChain is a trust folder with space s.
func pinChain(t *testing.T, s string) *trust.Chain {
	t.Helper()
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Space(s); err != nil {
		t.Fatal(err)
	}
	return chain
}

func readPinMap(t *testing.T, chain *trust.Chain, s string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(StateDir(chain.Dir(), s), PinFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEnableReferencePin: without a client id Enable pins the reference's way
// ({ver, url, issuer, audience, jwksUri}, issuer = audience = the origin), the pinned
// verifier checks its tokens, and the pin is never re-pointed.
func TestEnableReferencePin(t *testing.T) {
	chain := pinChain(t, "u")
	pin, err := Enable(chain, "u", "https://IdP.example/api/auth/", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ver": 1.0, "url": "https://idp.example/api/auth", "issuer": "https://idp.example",
		"audience": "https://idp.example", "jwksUri": "https://idp.example/api/auth/jwks"}
	if got := readPinMap(t, chain, "u"); !maps.Equal(got, want) {
		t.Fatalf("pin file %v, want %v", got, want)
	}
	if pin.OIDC() || pin.LoginURL() != "https://idp.example/api/auth" || pin.AudienceName() != "https://idp.example" {
		t.Fatalf("pin %+v", pin)
	}
	if v, ok := pin.Verifier().(*oidc.PinnedVerifier); !ok || v.Issuer != "https://idp.example" || v.JWKSURI != want["jwksUri"] {
		t.Fatalf("verifier %#v", pin.Verifier())
	}
	if _, err := Enable(chain, "u", "https://idp.example/api/auth", ""); err != nil {
		t.Fatalf("same IdP again: %v", err)
	}
	for _, c := range []struct{ idp, client string }{
		{"https://idp.example/other", ""},
		{"https://idp.example/api/auth", "cotal"},
		{"https://idp.example", "cotal"},
	} {
		if _, err := Enable(chain, "u", c.idp, c.client); err == nil || !strings.Contains(err.Error(), "re-key every owner") {
			t.Errorf("re-pin to %s %q: %v", c.idp, c.client, err)
		}
	}
	if _, err := Enable(pinChain(t, "v"), "v", "http://idp.example/api/auth", ""); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http off loopback: %v", err)
	}
}

// TestOIDCPinKept: a pin an older release wrote ({ver, space, issuer, clientId}) keeps
// working: read as the OIDC form, kept by `up --user-auth --idp <issuer>` with or without
// its client id, and refused for another client id.
func TestOIDCPinKept(t *testing.T) {
	chain := pinChain(t, "u")
	dir := StateDir(chain.Dir(), "u")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"ver": 1, "space": "u", "issuer": "https://idp.example/realms/team", "clientId": "cotal"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, PinFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"", "cotal"} {
		pin, err := Enable(chain, "u", "https://idp.example/realms/team", client)
		if err != nil || !pin.OIDC() || pin.ClientID != "cotal" {
			t.Fatalf("enable with client %q: %+v %v", client, pin, err)
		}
	}
	if v, ok := must(ReadPin(chain.Dir(), "u")).Verifier().(*oidc.Verifier); !ok || v.ClientID != "cotal" {
		t.Fatalf("verifier %#v", v)
	}
	if _, err := Enable(chain, "u", "https://idp.example/realms/team", "other"); err == nil || !strings.Contains(err.Error(), "client cotal") {
		t.Errorf("other client id: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, PinFile)); string(b) != old {
		t.Errorf("the old pin was rewritten: %s", b)
	}
	// A new OIDC pin is still written in Go's form.
	chain2 := pinChain(t, "w")
	if _, err := Enable(chain2, "w", "https://idp.example/realms/team", "team"); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ver": 1.0, "space": "w", "issuer": "https://idp.example/realms/team", "clientId": "team"}
	if got := readPinMap(t, chain2, "w"); !maps.Equal(got, want) {
		t.Fatalf("OIDC pin %v, want %v", got, want)
	}
}

// TestReadPinRefusesMalformed: a reference pin missing one of its four strings, or with a
// JWKS off https, is refused with the reference's advice; unknown fields are ignored.
func TestReadPinRefusesMalformed(t *testing.T) {
	chain := pinChain(t, "u")
	dir := StateDir(chain.Dir(), "u")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		`{"ver":1,"url":"https://i.example/a","issuer":"https://i.example","audience":"https://i.example"}`:                                                      "re-pin with `cotal up --user-auth --idp <url>`",
		`{"ver":2,"url":"https://i.example/a","issuer":"https://i.example","audience":"https://i.example","jwksUri":"https://i.example/a/jwks"}`:                 "version 2",
		`{"ver":1,"url":"https://i.example/a","issuer":"https://i.example","audience":"https://i.example","jwksUri":"http://i.example/a/jwks"}`:                  "https",
		`{"ver":1,"url":"https://i.example/a","issuer":"https://i.example","audience":"https://i.example","jwksUri":"https://i.example/a/jwks","extra":{"x":1}}`: "",
	} {
		if err := os.WriteFile(filepath.Join(dir, PinFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPin(chain.Dir(), "u")
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
