package oidc

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

// pinnedFor is the verifier `cotal up --user-auth --idp <p.URL>` builds: issuer = audience
// = the origin, keys from <base>/jwks.
func pinnedFor(p *oidctest.RefIdP, now func() time.Time) *PinnedVerifier {
	return &PinnedVerifier{Issuer: p.Origin, Audience: p.Origin, JWKSURI: p.URL + "/jwks", Now: now}
}

// TestPinnedVerifierAccepts: a reference IdP's user JWT verifies, with aud a string or a
// one-element array, and iat up to the 5 s tolerance ahead; the issuer returned is the pin's.
func TestPinnedVerifierAccepts(t *testing.T) {
	clk := oidctest.NewClock(testclock.Epoch(t))
	p := oidctest.StartRef(t, &oidctest.RefIdP{Now: clk.Now})
	v := pinnedFor(p, clk.Now)
	tok, err := p.IDToken("alice-sub")
	if err != nil {
		t.Fatal(err)
	}
	iss, sub, err := v.VerifyIDToken(context.Background(), tok)
	if err != nil || iss != p.Origin || sub != "alice-sub" {
		t.Fatalf("verify: %q %q %v", iss, sub, err)
	}
	now := clk.Now()
	for name, claims := range map[string]map[string]any{
		"aud array":  {"iss": p.Origin, "aud": []string{p.Origin}, "sub": "s", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()},
		"iat +4s":    {"iss": p.Origin, "aud": p.Origin, "sub": "s", "iat": now.Add(4 * time.Second).Unix(), "exp": now.Add(time.Minute).Unix()},
		"exp -4s":    {"iss": p.Origin, "aud": p.Origin, "sub": "s", "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(-4 * time.Second).Unix()},
		"extra, nbf": {"iss": p.Origin, "aud": p.Origin, "sub": "s", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix(), "email": "a@example.test"},
	} {
		tok, err := p.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		if _, sub, err := v.VerifyIDToken(context.Background(), tok); err != nil || sub != "s" {
			t.Errorf("%s: %q %v", name, sub, err)
		}
	}
}

// TestPinnedVerifierRefuses: every check of the reference's verifyIdpToken refuses with
// its reason, wrapping ErrInvalid.
func TestPinnedVerifierRefuses(t *testing.T) {
	clk := oidctest.NewClock(testclock.Epoch(t))
	p := oidctest.StartRef(t, &oidctest.RefIdP{Now: clk.Now})
	v := pinnedFor(p, clk.Now)
	now := clk.Now()
	base := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"iss": p.Origin, "aud": p.Origin, "sub": "s", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		edit(c)
		return c
	}
	sign := func(c map[string]any, headers map[string]any) string {
		tok, err := p.SignWith(c, headers)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// A token signed with another algorithm, and one by a key the JWKS does not publish.
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ecKey}, (&jose.SignerOptions{}).WithHeader("kid", p.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	es256, err := jwt.Signed(es).Claims(base(func(map[string]any) {})).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	os, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: other}, (&jose.SignerOptions{}).WithHeader("kid", p.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(os).Claims(base(func(map[string]any) {})).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, tok, want string
	}{
		{"wrong alg", es256, "alg must be EdDSA"},
		{"key not in the JWKS", forged, "signature"},
		{"jku header", sign(base(func(map[string]any) {}), map[string]any{"jku": p.URL + "/jwks"}), "embedded key material"},
		{"x5u header", sign(base(func(map[string]any) {}), map[string]any{"x5u": "https://evil.example/x"}), "embedded key material"},
		{"jwk header", sign(base(func(map[string]any) {}), map[string]any{"jwk": map[string]string{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}), "embedded key material"},
		{"wrong aud", sign(base(func(c map[string]any) { c["aud"] = "https://other.example" }), nil), "aud must be exactly"},
		{"two audiences", sign(base(func(c map[string]any) { c["aud"] = []string{p.Origin, "https://other.example"} }), nil), "aud must be exactly"},
		{"no aud", sign(base(func(c map[string]any) { delete(c, "aud") }), nil), "aud must be exactly"},
		{"wrong iss", sign(base(func(c map[string]any) { c["iss"] = p.URL }), nil), "iss"},
		{"missing exp", sign(base(func(c map[string]any) { delete(c, "exp") }), nil), "exp is required"},
		{"expired", sign(base(func(c map[string]any) { c["exp"] = now.Add(-6 * time.Second).Unix() }), nil), "expired"},
		{"missing iat", sign(base(func(c map[string]any) { delete(c, "iat") }), nil), "iat is required"},
		{"iat in the future", sign(base(func(c map[string]any) { c["iat"] = now.Add(6 * time.Second).Unix() }), nil), "iat is in the future"},
		{"nbf in the future", sign(base(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() }), nil), "nbf"},
		{"empty sub", sign(base(func(c map[string]any) { c["sub"] = "" }), nil), "sub must be"},
		{"numeric sub", sign(base(func(c map[string]any) { c["sub"] = 42 }), nil), "sub"},
		{"not a JWT", "nope", "parse"},
	} {
		_, _, err := v.VerifyIDToken(context.Background(), c.tok)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", c.name, err, c.want)
		}
	}
	bad := &PinnedVerifier{Issuer: p.Origin, Audience: p.Origin, JWKSURI: "http://idp.example/jwks", Now: clk.Now}
	tok, _ := p.IDToken("s")
	if _, _, err := bad.VerifyIDToken(context.Background(), tok); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http JWKS off loopback: %v", err)
	}
}

// TestNormalizeIdPURL follows the reference's normalizeIdpUrl.
func TestNormalizeIdPURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://IdP.Example/api/auth/":    "https://idp.example/api/auth",
		"https://idp.example:443/api/auth": "https://idp.example/api/auth",
		"https://idp.example":              "https://idp.example",
		"https://idp.example/":             "https://idp.example",
		"http://127.0.0.1:5555/api/auth":   "http://127.0.0.1:5555/api/auth",
		"http://localhost:80/x/../y//":     "http://localhost/y",
		"http://[::1]:9/a":                 "http://[::1]:9/a",
	} {
		got, err := NormalizeIdPURL(in)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	if o := Origin("https://idp.example/api/auth"); o != "https://idp.example" {
		t.Errorf("origin: %q", o)
	}
	if o := Origin("http://127.0.0.1:9"); o != "http://127.0.0.1:9" {
		t.Errorf("origin: %q", o)
	}
	for in, want := range map[string]string{
		"http://idp.example/api/auth":          "https",
		"ftp://idp.example":                    "https",
		"https://idp.example/api?x=1":          "query",
		"https://idp.example/api#f":            "fragment",
		"https://idp.example/api?":             "query",
		"https://real.example@evil.example/a":  "credentials",
		"idp.example":                          "not a valid URL",
		"https://user:pw@idp.example/api/auth": "evil",
	} {
		_, err := NormalizeIdPURL(in)
		if err == nil || (want != "evil" && !strings.Contains(err.Error(), want)) || strings.Contains(fmtErr(err), "pw") {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
