package oidc

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

// testIdP is a real OIDC issuer on a loopback listener: it serves discovery and a JWKS
// and signs ID tokens with Ed25519 keys.
type testIdP struct {
	URL string

	mu        sync.Mutex
	discIss   string // issuer the discovery document states; "" means URL
	keys      map[string]ed25519.PrivateKey
	published []string // kids in the JWKS
	jwksHits  int
}

func startIdP(t *testing.T) *testIdP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &testIdP{URL: "http://" + ln.Addr().String(), keys: map[string]ed25519.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		iss := p.discIss
		p.mu.Unlock()
		if iss == "" {
			iss = p.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": p.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.jwksHits++
		var set jose.JSONWebKeySet
		for _, kid := range p.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: p.keys[kid].Public(), KeyID: kid, Algorithm: string(jose.EdDSA), Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	p.rotate(t, "k1")
	return p
}

// rotate creates key kid and makes it the only published key.
func (p *testIdP) rotate(t *testing.T, kid string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = priv
	p.published = []string{kid}
}

func (p *testIdP) hits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwksHits
}

// sign issues a token with key kid and claims c.
func (p *testIdP) sign(t *testing.T, kid string, c jwt.Claims) string {
	t.Helper()
	p.mu.Lock()
	key := p.keys[kid]
	p.mu.Unlock()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claims are good ID-token claims issued at base by iss.
func claims(base time.Time, iss string) jwt.Claims {
	return jwt.Claims{Issuer: iss, Subject: "248289761001", Audience: jwt.Audience{"cotal", "other"},
		IssuedAt: jwt.NewNumericDate(base), NotBefore: jwt.NewNumericDate(base), Expiry: jwt.NewNumericDate(base.Add(time.Hour))}
}

func newVerifier(p *testIdP, c *oidctest.Clock) *Verifier {
	return &Verifier{Issuer: p.URL, ClientID: "cotal", Now: c.Now}
}

func TestVerify(t *testing.T) {
	base := testclock.Epoch(t)
	p := startIdP(t)
	good := p.sign(t, "k1", claims(base, p.URL))
	parts := strings.Split(good, ".")
	noneHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	sigBytes, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sigBytes[0] ^= 1
	tampered := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sigBytes)

	expired := claims(base, p.URL)
	expired.Expiry = jwt.NewNumericDate(base.Add(-2 * time.Minute))
	slightlyExpired := claims(base, p.URL)
	slightlyExpired.Expiry = jwt.NewNumericDate(base.Add(-30 * time.Second))
	wrongAud := claims(base, p.URL)
	wrongAud.Audience = jwt.Audience{"someone-else"}
	wrongIss := claims(base, "http://127.0.0.1:1")
	future := claims(base, p.URL)
	future.IssuedAt = jwt.NewNumericDate(base.Add(5 * time.Minute))
	noSub := claims(base, p.URL)
	noSub.Subject = ""

	for _, c := range []struct {
		name string
		tok  string
		ok   bool
	}{
		{"good", good, true},
		{"expired within leeway", p.sign(t, "k1", slightlyExpired), true},
		{"expired", p.sign(t, "k1", expired), false},
		{"wrong aud", p.sign(t, "k1", wrongAud), false},
		{"wrong iss", p.sign(t, "k1", wrongIss), false},
		{"iat in future", p.sign(t, "k1", future), false},
		{"no sub", p.sign(t, "k1", noSub), false},
		{"alg none", noneHdr + "." + parts[1] + ".", false},
		{"tampered signature", tampered, false},
		{"garbage", "not.a.token", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newVerifier(p, oidctest.NewClock(base))
			iss, sub, err := v.VerifyIDToken(t.Context(), c.tok)
			if !c.ok {
				if err == nil {
					t.Fatalf("accepted: %q %q", iss, sub)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error does not wrap ErrInvalid: %v", err)
				}
				if strings.Contains(err.Error(), c.tok) {
					t.Fatalf("error contains the token: %v", err)
				}
				return
			}
			if err != nil || iss != p.URL || sub != "248289761001" {
				t.Fatalf("got (%q, %q, %v)", iss, sub, err)
			}
		})
	}
}

// TestEmbeddedKey: a token bringing its own jwk is refused even though it verifies under it.
func TestEmbeddedKey(t *testing.T) {
	base := testclock.Epoch(t)
	p := startIdP(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"kid": "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims(base, p.URL)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := newVerifier(p, oidctest.NewClock(base)).VerifyIDToken(t.Context(), tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("embedded jwk: %v", err)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	base := testclock.Epoch(t)
	p := startIdP(t)
	p.mu.Lock()
	p.discIss = p.URL + "/"
	p.mu.Unlock()
	_, _, err := newVerifier(p, oidctest.NewClock(base)).VerifyIDToken(t.Context(), p.sign(t, "k1", claims(base, p.URL)))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "discovery: issuer") {
		t.Fatalf("got %v", err)
	}
	if p.hits() != 0 {
		t.Fatalf("jwks fetched %d times after a mismatched discovery", p.hits())
	}
}

// TestRotation: a token with an unknown kid makes the verifier refetch the JWKS, at most
// once per RefetchInterval.
func TestRotation(t *testing.T) {
	base := testclock.Epoch(t)
	p := startIdP(t)
	clk := oidctest.NewClock(base)
	v := newVerifier(p, clk)
	if _, _, err := v.VerifyIDToken(t.Context(), p.sign(t, "k1", claims(base, p.URL))); err != nil {
		t.Fatal(err)
	}
	if p.hits() != 1 {
		t.Fatalf("jwks hits %d, want 1", p.hits())
	}
	p.rotate(t, "k2")
	tok2 := p.sign(t, "k2", claims(base, p.URL))
	if _, _, err := v.VerifyIDToken(t.Context(), tok2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kid within the refetch interval: %v", err)
	}
	if p.hits() != 1 {
		t.Fatalf("jwks refetched within the interval: %d hits", p.hits())
	}
	clk.Add(RefetchInterval)
	if iss, sub, err := v.VerifyIDToken(t.Context(), tok2); err != nil || iss != p.URL || sub != "248289761001" {
		t.Fatalf("after rotation: (%q, %q, %v)", iss, sub, err)
	}
	if p.hits() != 2 {
		t.Fatalf("jwks hits %d, want 2", p.hits())
	}
	// the old key is gone from the refetched set
	if _, _, err := v.VerifyIDToken(t.Context(), p.sign(t, "k1", claims(base, p.URL))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("retired key accepted: %v", err)
	}
}

func TestCheckIssuer(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"https://accounts.google.com", true},
		{"https://idp.example.com/realms/x", true},
		{"http://127.0.0.1:5556", true},
		{"http://localhost:5556/dex", true},
		{"http://idp.example.com", false},
		{"ftp://idp.example.com", false},
		{"idp.example.com", false},
		{"https://idp.example.com?x=1", false},
		{"", false},
	} {
		if err := CheckIssuer(c.in); (err == nil) != c.ok {
			t.Errorf("CheckIssuer(%q) = %v", c.in, err)
		}
	}
	v := &Verifier{Issuer: "http://idp.example.com", ClientID: "cotal"}
	if _, _, err := v.VerifyIDToken(t.Context(), "x.y.z"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("plain-http issuer: %v", err)
	}
}
