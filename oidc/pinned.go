package oidc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/redact"
)

// PinnedLeeway is the clock skew a PinnedVerifier allows on exp, nbf and iat: the
// reference's default clockToleranceSec.
const PinnedLeeway = 5 * time.Second

// parseAlgs are the algorithms a token may name to be parsed at all; PinnedVerifier then
// refuses every one but EdDSA with its own sentence.
var parseAlgs = []jose.SignatureAlgorithm{jose.EdDSA, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384,
	jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.HS256, jose.HS384, jose.HS512}

// NormalizeIdPURL checks and normalizes an IdP base URL as the reference's normalizeIdpUrl
// (implementations/auth/src/login.ts) does: https, or http on a loopback host (127.0.0.1,
// [::1], localhost); no query, fragment or userinfo. The result is the origin (scheme and
// host lower-cased, default port dropped) followed by the path without trailing slashes.
func NormalizeIdPURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "" && u.Opaque != "") {
		return "", fmt.Errorf("idp url %q is not a valid URL", redact.URL(raw))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	loopback := host == "127.0.0.1" || host == "::1" || host == "localhost"
	if u.Scheme != "https" && (u.Scheme != "http" || !loopback) {
		return "", fmt.Errorf("idp url must be https (or loopback http for local dev) - got %q", redact.URL(raw))
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return "", fmt.Errorf("idp url must not carry a query or fragment - got %q", redact.URL(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("idp url must not embed credentials before the host - the host it would actually contact is %q", u.Host)
	}
	port := u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	h := host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if port != "" {
		h += ":" + port
	}
	p := u.ResolveReference(&url.URL{}).EscapedPath() // dot segments resolved, as WHATWG URL does
	return u.Scheme + "://" + h + strings.TrimRight(p, "/"), nil
}

// Origin returns the scheme://host[:port] of a URL NormalizeIdPURL returned: the issuer
// and audience the reference pins for an IdP base URL.
func Origin(normalized string) string {
	i := strings.Index(normalized, "://")
	if i < 0 {
		return normalized
	}
	if j := strings.IndexByte(normalized[i+3:], '/'); j >= 0 {
		return normalized[:i+3+j]
	}
	return normalized
}

// CheckJWKSURL accepts a JWKS URL that is https, or http on a loopback host: the
// reference's pinnedJwksResolver rule.
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("jwks url %q is not a valid URL", raw)
	}
	h := strings.ToLower(u.Hostname())
	if u.Scheme == "https" || (u.Scheme == "http" && (h == "127.0.0.1" || h == "::1" || h == "localhost")) {
		return nil
	}
	return fmt.Errorf("jwks url %q: JWKS origin must be https (or loopback for dev)", raw)
}

// PinnedVerifier checks ID tokens of an IdP pinned the reference's way (`cotal up
// --user-auth --idp <base>` without --client-id; reference
// implementations/auth/src/idp.ts verifyIdpToken): no discovery, keys only from JWKSURI,
// EdDSA only. Set the fields before the first call to VerifyIDToken; it is then safe for
// concurrent use.
type PinnedVerifier struct {
	Issuer     string           // the exact iss; required
	Audience   string           // the exact aud (a string, or an array of exactly it); required
	JWKSURI    string           // the only place keys come from; required (see CheckJWKSURL)
	HTTPClient *http.Client     // nil means a client with a 10 s timeout
	Now        func() time.Time // nil means time.Now

	cache keyCache
}

// VerifyIDToken checks raw as the reference does and returns the pinned issuer and the
// token's subject: a header naming jku, jwk, x5u or x5c is refused; alg must be EdDSA and
// the key one of JWKSURI's (fetched on first use and again for an unknown kid at most once
// per RefetchInterval); iss must equal Issuer and aud be Audience or [Audience]; exp and
// iat are required, exp not past, nbf (if any) and iat not in the future, each within
// PinnedLeeway; sub a non-empty string. Every error wraps ErrInvalid and omits the token.
func (v *PinnedVerifier) VerifyIDToken(ctx context.Context, raw string) (issuer, subject string, err error) {
	iss, sub, _, err := v.VerifyIDTokenExpiry(ctx, raw)
	return iss, sub, err
}

// VerifyIDTokenExpiry is VerifyIDToken that also returns the token's exp, which the
// reference caps a person's bearer to.
func (v *PinnedVerifier) VerifyIDTokenExpiry(ctx context.Context, raw string) (issuer, subject string, exp time.Time, err error) {
	sub, exp, err := v.verify(ctx, raw)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("idp %s: %w: %w", v.Issuer, ErrInvalid, err)
	}
	return v.Issuer, sub, exp, nil
}

func (v *PinnedVerifier) verify(ctx context.Context, raw string) (string, time.Time, error) {
	switch {
	case v.Issuer == "" || v.Audience == "":
		return "", time.Time{}, errors.New("config: the pin needs an issuer and an audience")
	case CheckJWKSURL(v.JWKSURI) != nil:
		return "", time.Time{}, fmt.Errorf("config: %w", CheckJWKSURL(v.JWKSURI))
	}
	if err := checkKeyHeaders(raw); err != nil {
		return "", time.Time{}, err
	}
	tok, err := jwt.ParseSigned(raw, parseAlgs)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("parse: %w", err)
	}
	if len(tok.Headers) != 1 {
		return "", time.Time{}, fmt.Errorf("%d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	if h.JSONWebKey != nil {
		return "", time.Time{}, errors.New("embedded key material (jku/jwk/x5u/x5c) is rejected - keys resolve only via the pinned JWKS")
	}
	if h.Algorithm != string(jose.EdDSA) {
		return "", time.Time{}, fmt.Errorf("alg must be EdDSA (got %s)", h.Algorithm)
	}
	key, err := v.cache.key(ctx, v.now(), h.KeyID, h.Algorithm, func(ctx context.Context) (*jose.JSONWebKeySet, error) {
		return fetchJWKS(ctx, v.HTTPClient, v.JWKSURI)
	})
	if err != nil {
		return "", time.Time{}, err
	}
	var c struct {
		jwt.Claims
		Aud json.RawMessage `json:"aud"`
		Sub json.RawMessage `json:"sub"`
	}
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", time.Time{}, fmt.Errorf("signature: %w", err)
	}
	now := v.now()
	switch {
	case c.Issuer != v.Issuer:
		return "", time.Time{}, fmt.Errorf("iss %q, want %q", c.Issuer, v.Issuer)
	case !exactAudience(c.Aud, v.Audience):
		return "", time.Time{}, fmt.Errorf("aud must be exactly %q - a multi-audience session proof is rejected", v.Audience)
	case c.Expiry == nil:
		return "", time.Time{}, errors.New("exp is required - an IdP session proof must expire")
	case !now.Before(c.Expiry.Time().Add(PinnedLeeway)):
		return "", time.Time{}, errors.New("expired (exp)")
	case c.NotBefore != nil && now.Add(PinnedLeeway).Before(c.NotBefore.Time()):
		return "", time.Time{}, errors.New("not yet valid (nbf)")
	case c.IssuedAt == nil:
		return "", time.Time{}, errors.New("iat is required")
	case c.IssuedAt.Time().After(now.Add(PinnedLeeway)):
		return "", time.Time{}, errors.New("iat is in the future")
	}
	var sub string
	if err := json.Unmarshal(c.Sub, &sub); err != nil || sub == "" {
		return "", time.Time{}, errors.New("sub must be a non-empty string user id")
	}
	return sub, c.Expiry.Time(), nil
}

// checkKeyHeaders refuses a compact JWS whose protected header names jku, jwk, x5u or
// x5c, before anything else reads the token.
func checkKeyHeaders(raw string) error {
	dot := strings.IndexByte(raw, '.')
	if dot < 0 {
		return errors.New("parse: not a compact JWS")
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(raw[:dot], "="))
	if err != nil {
		return fmt.Errorf("parse header: %w", err)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("parse header: %w", err)
	}
	for _, k := range []string{"jku", "jwk", "x5u", "x5c"} {
		if _, ok := h[k]; ok {
			return errors.New("embedded key material (jku/jwk/x5u/x5c) is rejected - keys resolve only via the pinned JWKS")
		}
	}
	return nil
}

// exactAudience reports whether the raw aud claim is want, or an array holding only want.
func exactAudience(raw json.RawMessage, want string) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s == want
	}
	var a []string
	return json.Unmarshal(raw, &a) == nil && len(a) == 1 && a[0] == want
}

func (v *PinnedVerifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
