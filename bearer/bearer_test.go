package bearer_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/protocol"
)

const owner = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"

func load(t *testing.T, dir, space string) *bearer.Issuer {
	t.Helper()
	iss, err := bearer.Load(dir, space)
	if err != nil {
		t.Fatalf("load issuer: %v", err)
	}
	return iss
}

func TestLoadCreatesOnceWithModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth", "space.x")
	a := load(t, dir, "prod")
	b := load(t, dir, "prod")
	if a.KeyID() != b.KeyID() || a.KeyID() == "" {
		t.Fatalf("kid %q then %q, want one stable kid", a.KeyID(), b.KeyID())
	}
	if a.Issuer() != "urn:cotal:auth:prod" || a.Space() != "prod" {
		t.Fatalf("issuer %q space %q", a.Issuer(), a.Space())
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, bearer.IssuerKeyFile): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	if _, err := bearer.Load(dir, "other"); !errors.Is(err, bearer.ErrCorrupt) {
		t.Fatalf("load for another space: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(filepath.Join(dir, bearer.IssuerKeyFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bearer.Load(dir, "prod"); !errors.Is(err, bearer.ErrCorrupt) {
		t.Fatalf("load of a broken file: %v, want ErrCorrupt", err)
	}
}

func TestIssueVerify(t *testing.T) {
	dir := t.TempDir()
	now := testclock.Epoch(t)
	iss := load(t, dir, "prod")
	iss.Now = func() time.Time { return now }
	other := load(t, t.TempDir(), "prod") // same space, another key
	other.Now = iss.Now
	otherSpace := load(t, t.TempDir(), "dev")
	otherSpace.Now = iss.Now

	human := bearer.Claims{Owner: owner, Actor: "alice", Kind: bearer.KindHuman, Scope: []string{"spawn", "role:default"}}
	tok, err := iss.Issue(human)
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	c, err := iss.Verify(tok)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if c.Owner != owner || c.Actor != "alice" || c.Kind != bearer.KindHuman || c.TTL != bearer.MaxHumanLifetime ||
		!c.Expiry.Equal(now.Add(bearer.MaxHumanLifetime)) || len(c.Scope) != 2 {
		t.Fatalf("claims %+v", c)
	}
	agentTok, err := iss.Issue(bearer.Claims{Owner: owner, Actor: "bot", Kind: bearer.KindAgent, TTL: time.Minute})
	if err != nil {
		t.Fatalf("issue agent: %v", err)
	}

	forge := func(mut func(*jwt.Claims, map[string]any)) string {
		t.Helper()
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: key, KeyID: iss.KeyID()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		std := jwt.Claims{Issuer: iss.Issuer(), Subject: owner, Audience: jwt.Audience{"prod"},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}
		priv := map[string]any{"ver": 1, "act": map[string]any{"owner": owner, "actor": "alice", "kind": "human"}}
		if mut != nil {
			mut(&std, priv)
		}
		out, err := jwt.Signed(s).Claims(std).Claims(priv).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tampered := func(tok string) string {
		parts := strings.Split(tok, ".")
		payload := []byte(parts[1])
		payload[len(payload)/2] ^= 1
		return parts[0] + "." + string(payload) + "." + parts[2]
	}

	for _, tc := range []struct {
		name  string
		tok   string
		at    time.Duration // offset of the verifier's clock
		by    *bearer.Issuer
		valid bool
	}{
		{"fresh", tok, 0, iss, true},
		{"agent", agentTok, 0, iss, true},
		{"within leeway after exp", tok, bearer.MaxHumanLifetime + bearer.Leeway - time.Second, iss, true},
		{"expired", tok, bearer.MaxHumanLifetime + bearer.Leeway + time.Second, iss, false},
		{"agent expired", agentTok, 2 * time.Minute, iss, false},
		{"not yet valid", tok, -time.Minute, iss, false},
		{"other key", tok, 0, other, false},
		{"other space", tok, 0, otherSpace, false},
		{"tampered", tampered(tok), 0, iss, false},
		{"garbage", "not.a.jwt", 0, iss, false},
		{"forged with issuer kid", forge(nil), 0, iss, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.by.Now = func() time.Time { return now.Add(tc.at) }
			defer func() { tc.by.Now = func() time.Time { return now } }()
			_, err := tc.by.Verify(tc.tok)
			if tc.valid && err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !tc.valid && !errors.Is(err, bearer.ErrInvalid) {
				t.Fatalf("verify: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestVerifyClaims signs tokens with the issuer's own key file contents so only the claims
// are wrong: wrong audience, wrong issuer, too long a lifetime, owner mismatch.
func TestVerifyClaims(t *testing.T) {
	dir := t.TempDir()
	now := testclock.Epoch(t)
	iss := load(t, dir, "prod")
	iss.Now = func() time.Time { return now }
	var f struct{ Seed, Kid string }
	b, err := os.ReadFile(filepath.Join(dir, bearer.IssuerKeyFile))
	if err != nil || json.Unmarshal(b, &f) != nil {
		t.Fatalf("read key file: %v", err)
	}
	seed, err := base64.RawURLEncoding.DecodeString(f.Seed) // the issuer's own key, to forge only claims
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA,
		Key: jose.JSONWebKey{Key: ed25519.NewKeyFromSeed(seed), KeyID: f.Kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(mut func(*jwt.Claims, map[string]any)) string {
		std := jwt.Claims{Issuer: iss.Issuer(), Subject: owner, Audience: jwt.Audience{"prod"},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}
		act := map[string]any{"owner": owner, "actor": "alice", "kind": "agent"}
		priv := map[string]any{"ver": 1, "act": act}
		mut(&std, act)
		out, err := jwt.Signed(signer).Claims(std).Claims(priv).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		mut   func(*jwt.Claims, map[string]any)
		valid bool
	}{
		{"control", func(*jwt.Claims, map[string]any) {}, true},
		{"wrong aud", func(c *jwt.Claims, _ map[string]any) { c.Audience = jwt.Audience{"dev"} }, false},
		{"two auds", func(c *jwt.Claims, _ map[string]any) { c.Audience = jwt.Audience{"prod", "dev"} }, false},
		{"wrong iss", func(c *jwt.Claims, _ map[string]any) { c.Issuer = "urn:cotal:auth:dev" }, false},
		{"no exp", func(c *jwt.Claims, _ map[string]any) { c.Expiry = nil }, false},
		{"agent too long", func(c *jwt.Claims, _ map[string]any) { c.Expiry = jwt.NewNumericDate(now.Add(301 * time.Second)) }, false},
		{"owner mismatch", func(_ *jwt.Claims, a map[string]any) { a["owner"] = "u_" + strings.Repeat("b", 26) }, false},
		{"bad owner", func(c *jwt.Claims, a map[string]any) { c.Subject = "local"; a["owner"] = "local" }, false},
		{"unknown kind", func(_ *jwt.Claims, a map[string]any) { a["kind"] = "robot" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := iss.Verify(sign(tc.mut))
			if tc.valid != (err == nil) || (err != nil && !errors.Is(err, bearer.ErrInvalid)) {
				t.Fatalf("verify: %v, want valid=%v", err, tc.valid)
			}
		})
	}
}

func TestIssueRefuses(t *testing.T) {
	iss := load(t, t.TempDir(), "prod")
	for _, tc := range []struct {
		name string
		c    bearer.Claims
		want error
	}{
		{"human too long", bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindHuman, TTL: 901 * time.Second}, bearer.ErrLifetime},
		{"agent too long", bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindAgent, TTL: 301 * time.Second}, bearer.ErrLifetime},
		{"negative", bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindAgent, TTL: -time.Second}, bearer.ErrLifetime},
		{"no kind", bearer.Claims{Owner: owner, Actor: "a"}, bearer.ErrClaims},
		{"local owner", bearer.Claims{Owner: "local", Actor: "a", Kind: bearer.KindHuman}, bearer.ErrClaims},
		{"bad actor", bearer.Claims{Owner: owner, Actor: "a.b", Kind: bearer.KindHuman}, bearer.ErrClaims},
		{"bad scope", bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindHuman, Scope: []string{"a b"}}, bearer.ErrClaims},
		{"bad lifecycle uid", bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindHuman, LifecycleUID: "Not-A-Uid"}, bearer.ErrClaims},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := iss.Issue(tc.c); !errors.Is(err, tc.want) {
				t.Fatalf("issue: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := iss.Issue(bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindHuman, TTL: 900 * time.Second}); err != nil {
		t.Fatalf("issue at the human maximum: %v", err)
	}
	uid := protocol.NewLifecycleUID()
	tok, err := iss.Issue(bearer.Claims{Owner: owner, Actor: "a", Kind: bearer.KindAgent, LifecycleUID: uid})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := iss.Verify(tok); err != nil || c.LifecycleUID != uid {
		t.Fatalf("lifecycle uid round trip: %q, %v; want %q", c.LifecycleUID, err, uid)
	}
}

// TestJWKSVerifiesStandalone checks a bearer with nothing but the published JWKS and go-jose.
func TestJWKSVerifiesStandalone(t *testing.T) {
	iss := load(t, t.TempDir(), "prod")
	tok, err := iss.Issue(bearer.Claims{Owner: owner, Actor: "alice", Kind: bearer.KindHuman})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := iss.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"d"`) {
		t.Fatalf("jwks leaks the private key: %s", raw)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatalf("decode jwks: %v", err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(parsed.Headers[0].KeyID)
	if len(keys) != 1 || keys[0].Algorithm != "EdDSA" || !keys[0].IsPublic() {
		t.Fatalf("jwks %s has no public EdDSA key for kid %q", raw, parsed.Headers[0].KeyID)
	}
	var c jwt.Claims
	if err := parsed.Claims(keys[0].Key, &c); err != nil {
		t.Fatalf("standalone verify: %v", err)
	}
	if err := c.Validate(jwt.Expected{Issuer: "urn:cotal:auth:prod", AnyAudience: jwt.Audience{"prod"}, Subject: owner}); err != nil {
		t.Fatalf("standalone claims: %v", err)
	}
}

func TestOwner(t *testing.T) {
	dir := t.TempDir()
	secret, err := bearer.LoadOwnerSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := bearer.LoadOwnerSecret(dir)
	if err != nil || string(again) != string(secret) || len(secret) != bearer.OwnerSecretSize {
		t.Fatalf("secret reload: %v, %d bytes, same=%v", err, len(secret), string(again) == string(secret))
	}
	if st, err := os.Stat(filepath.Join(dir, bearer.OwnerSecretFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("owner secret mode: %v", err)
	}
	a := bearer.Owner(secret, "https://idp.example", "alice")
	if !protocol.ValidOwner(a) || a == protocol.OwnerLocal || len(a) != 28 {
		t.Fatalf("owner %q is not u_ + 26 base32", a)
	}
	if a != bearer.Owner(secret, "https://idp.example", "alice") {
		t.Fatal("owner is not deterministic")
	}
	for _, o := range []string{
		bearer.Owner(secret, "https://idp.example", "bob"),
		bearer.Owner(secret, "https://idp.example/", "alice"),
		bearer.Owner(make([]byte, 32), "https://idp.example", "alice"),
	} {
		if o == a || !protocol.ValidOwner(o) {
			t.Fatalf("owner %q collides with %q or is invalid", o, a)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, bearer.OwnerSecretFile), []byte(`{"ver":1,"secret":"AAAA"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bearer.LoadOwnerSecret(dir); !errors.Is(err, bearer.ErrCorrupt) {
		t.Fatalf("short secret: %v, want ErrCorrupt", err)
	}
}

func FuzzOwner(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), "https://idp.example", "alice")
	f.Fuzz(func(t *testing.T, secret []byte, issuer, subject string) {
		if o := bearer.Owner(secret, issuer, subject); !protocol.ValidOwner(o) {
			t.Fatalf("owner %q is invalid", o)
		}
	})
}
