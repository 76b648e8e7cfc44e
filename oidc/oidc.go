// Package oidc verifies ID tokens of an OpenID Connect identity provider: it discovers the
// provider's JWKS from <issuer>/.well-known/openid-configuration and checks a token's
// signature, issuer, audience and validity period.
package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/redact"
)

// ErrInvalid is wrapped by every error of VerifyIDToken: the token was refused, or the
// provider's keys could not be obtained to check it.
var ErrInvalid = errors.New("invalid ID token")

const (
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway = 60 * time.Second
	// RefetchInterval is the least time between two JWKS fetches caused by an unknown kid.
	RefetchInterval = time.Minute
	// maxBody bounds the discovery document and the JWKS read from the provider.
	maxBody = 1 << 20
	// defaultTimeout bounds one HTTP request when HTTPClient is nil.
	defaultTimeout = 10 * time.Second
)

// allowedAlgs are the signature algorithms an ID token may use; "none" is never among them.
var allowedAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Verifier checks ID tokens of one OIDC provider for one client. Set the fields before the
// first call to VerifyIDToken; it is then safe for concurrent use.
type Verifier struct {
	Issuer     string           // the provider's issuer URL, exactly as in its tokens; required (see CheckIssuer)
	ClientID   string           // the audience a token must name; required
	HTTPClient *http.Client     // nil means a client with a 10 s timeout
	Now        func() time.Time // nil means time.Now

	cache keyCache
}

// keyCache holds the keys of one JWKS, fetched on first use and again for an unknown kid
// at most once per RefetchInterval.
type keyCache struct {
	mu      sync.Mutex
	keys    *jose.JSONWebKeySet // nil until the first successful fetch
	fetched time.Time           // time of the last fetch attempt; zero means never
}

// CheckIssuer accepts an issuer URL that is https://, or http:// on 127.0.0.1 or localhost
// (tests and local IdPs), with a host and without query or fragment.
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil {
		return fmt.Errorf("issuer %q is not a URL: %w", redact.URL(issuer), redact.ParseError(err))
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer %q: want scheme://host[/path] without query, fragment or userinfo", redact.URL(issuer))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "127.0.0.1" || h == "localhost" {
			return nil
		}
		return fmt.Errorf("issuer %q: http is only allowed on 127.0.0.1 or localhost, want https", redact.URL(issuer))
	default:
		return fmt.Errorf("issuer %q: scheme %q, want https", redact.URL(issuer), u.Scheme)
	}
}

// VerifyIDToken checks raw, a compact JWS ID token, and returns its issuer and subject. It
// fetches the provider's discovery document and JWKS on first use, and again when the
// token's kid is unknown (at most once per RefetchInterval). The token must be signed with
// RS256, ES256 or EdDSA by a key of the JWKS (embedded jwk, jku and x5u headers are refused),
// and have iss == Issuer, ClientID among its aud, an exp not past and iat and nbf not in the
// future (each within Leeway), and a sub. Every error wraps ErrInvalid and omits the token.
func (v *Verifier) VerifyIDToken(ctx context.Context, raw string) (issuer, subject string, err error) {
	iss, sub, _, err := v.VerifyIDTokenExpiry(ctx, raw)
	return iss, sub, err
}

// VerifyIDTokenExpiry is VerifyIDToken that also returns the token's exp.
func (v *Verifier) VerifyIDTokenExpiry(ctx context.Context, raw string) (issuer, subject string, exp time.Time, err error) {
	iss, sub, exp, err := v.verify(ctx, raw)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("oidc %s: %w: %w", v.Issuer, ErrInvalid, err)
	}
	return iss, sub, exp, nil
}

func (v *Verifier) verify(ctx context.Context, raw string) (string, string, time.Time, error) {
	if err := CheckIssuer(v.Issuer); err != nil {
		return "", "", time.Time{}, fmt.Errorf("config: %w", err)
	}
	if v.ClientID == "" {
		return "", "", time.Time{}, errors.New("config: no client id")
	}
	tok, err := jwt.ParseSigned(raw, allowedAlgs)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("parse: %w", err)
	}
	if len(tok.Headers) != 1 {
		return "", "", time.Time{}, fmt.Errorf("%d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	if h.JSONWebKey != nil { // the key comes from the provider's JWKS, never from the token
		return "", "", time.Time{}, errors.New("embedded jwk header")
	}
	for _, k := range []jose.HeaderKey{"jku", "x5u", "x5c"} {
		if _, ok := h.ExtraHeaders[k]; ok {
			return "", "", time.Time{}, fmt.Errorf("key header %q", k)
		}
	}
	key, err := v.cache.key(ctx, v.now(), h.KeyID, h.Algorithm, v.fetch)
	if err != nil {
		return "", "", time.Time{}, err
	}
	var c jwt.Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", "", time.Time{}, fmt.Errorf("signature: %w", err)
	}
	if c.Expiry == nil || c.IssuedAt == nil {
		return "", "", time.Time{}, errors.New("missing exp or iat")
	}
	if c.Subject == "" {
		return "", "", time.Time{}, errors.New("missing sub")
	}
	exp := jwt.Expected{Issuer: v.Issuer, AnyAudience: jwt.Audience{v.ClientID}, Time: v.now()}
	if err := c.ValidateWithLeeway(exp, Leeway); err != nil {
		return "", "", time.Time{}, fmt.Errorf("claims: %w", err)
	}
	return c.Issuer, c.Subject, c.Expiry.Time(), nil
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// key returns the JWKS key for kid usable with alg, fetching the JWKS with fetch on first
// use and again for an unknown kid when the last fetch is RefetchInterval old.
func (c *keyCache) key(ctx context.Context, now time.Time, kid, alg string, fetch func(context.Context) (*jose.JSONWebKeySet, error)) (jose.JSONWebKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys != nil {
		if k, ok := pick(c.keys, kid, alg); ok {
			return k, nil
		}
		if now.Sub(c.fetched) < RefetchInterval {
			return jose.JSONWebKey{}, fmt.Errorf("no key for kid %q (keys refetched less than %s ago)", kid, RefetchInterval)
		}
	} else if !c.fetched.IsZero() && now.Sub(c.fetched) < RefetchInterval {
		return jose.JSONWebKey{}, fmt.Errorf("no keys: last fetch failed less than %s ago", RefetchInterval)
	}
	c.fetched = now
	keys, err := fetch(ctx)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	c.keys = keys
	if k, ok := pick(keys, kid, alg); ok {
		return k, nil
	}
	return jose.JSONWebKey{}, fmt.Errorf("no key for kid %q", kid)
}

// pick finds the public signing key for kid and alg. An empty kid matches only when the
// set has exactly one key.
func pick(set *jose.JSONWebKeySet, kid, alg string) (jose.JSONWebKey, bool) {
	var cands []jose.JSONWebKey
	if kid == "" {
		if len(set.Keys) == 1 {
			cands = set.Keys
		}
	} else {
		cands = set.Key(kid)
	}
	for _, k := range cands {
		if !k.IsPublic() || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != alg) {
			continue
		}
		return k, true
	}
	return jose.JSONWebKey{}, false
}

// fetch reads the discovery document, checks its issuer, and reads the JWKS it names.
func (v *Verifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, v.HTTPClient, strings.TrimSuffix(v.Issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if disc.Issuer != v.Issuer {
		return nil, fmt.Errorf("discovery: issuer %q, want %q", disc.Issuer, v.Issuer)
	}
	if err := CheckIssuer(disc.JWKSURI); err != nil {
		return nil, fmt.Errorf("discovery: jwks_uri: %w", err)
	}
	return fetchJWKS(ctx, v.HTTPClient, disc.JWKSURI)
}

// fetchJWKS reads the JWKS at u.
func fetchJWKS(ctx context.Context, c *http.Client, u string) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, c, u, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	return &set, nil
}

// getJSON GETs u with c (nil means a client with a 10 s timeout) and decodes its JSON body
// into dst.
func getJSON(ctx context.Context, c *http.Client, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, redact.RequestError(err))
	}
	req.Header.Set("Accept", "application/json")
	if c == nil {
		c = &http.Client{Timeout: defaultTimeout}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(dst); err != nil {
		return fmt.Errorf("get %s: decode: %w", u, err)
	}
	return nil
}
