// Package devicelogin signs a person in to an OpenID Connect provider with the RFC 8628 device
// authorization grant, keeps the resulting session (ID token and refresh token) on disk,
// and hands out fresh ID tokens from it, refreshing them when they are about to expire.
package devicelogin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/oidc"
)

// Sentinel errors; the errors of this package wrap them.
var (
	// ErrDenied: the person refused the request at the provider (access_denied).
	ErrDenied = errors.New("login denied")
	// ErrExpired: the device code expired before the person approved it (expired_token).
	ErrExpired = errors.New("login code expired")
	// ErrLoginRequired: there is no usable session; the person must run cotal login.
	ErrLoginRequired = errors.New("login required")
)

const (
	// DefaultClientID is the client id used when Config.ClientID is empty; it matches the
	// default of `cotal up --user-auth --client-id`.
	DefaultClientID = "cotal"
	// DefaultScope is requested when Config.Scope is empty.
	DefaultScope = "openid offline_access"
	// RefreshMargin: a cached ID token expiring within this is refreshed before use.
	RefreshMargin = 60 * time.Second
	// MaxDeviceCodeLifetime bounds the expires_in a provider may announce.
	MaxDeviceCodeLifetime = 24 * time.Hour
	// MaxInterval bounds the poll interval a provider may announce.
	MaxInterval = 300 * time.Second
	// defaultInterval is RFC 8628's interval when the provider announces none.
	defaultInterval = 5 * time.Second
	// slowDownStep is what RFC 8628 section 3.5 adds to the interval on slow_down.
	slowDownStep = 5 * time.Second
	// defaultTimeout bounds one HTTP request when HTTPClient is nil.
	defaultTimeout = 30 * time.Second
	// maxBody bounds every response body read from the provider.
	maxBody = 1 << 20
)

// Config names the provider and client, and holds the seams tests replace. The zero value
// of each optional field is documented beside it.
type Config struct {
	Issuer     string                                           // issuer URL of the provider; required (see oidc.CheckIssuer)
	ClientID   string                                           // "" means DefaultClientID
	Scope      string                                           // "" means DefaultScope
	HTTPClient *http.Client                                     // nil means a client with a 30 s timeout
	Prompt     func(Prompt)                                     // shows the code to the person; nil shows nothing
	Wait       func(ctx context.Context, d time.Duration) error // waits between polls; nil means a timer bounded by ctx
	Now        func() time.Time                                 // nil means time.Now
}

// Prompt is what a person needs to approve a device login.
type Prompt struct {
	VerificationURI         string        // page to open
	VerificationURIComplete string        // the page with the code filled in; "" if the provider gives none
	UserCode                string        // code to enter there
	ExpiresIn               time.Duration // how long the code is valid
}

// Session is a signed-in person at one provider, as stored on disk.
type Session struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"client_id"`
	Subject      string    `json:"sub"`
	IDToken      string    `json:"id_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry"` // exp of IDToken
}

func (c Config) clientID() string {
	if c.ClientID == "" {
		return DefaultClientID
	}
	return c.ClientID
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c Config) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return &http.Client{Timeout: defaultTimeout}
}

func (c Config) wait(ctx context.Context, d time.Duration) error {
	if c.Wait != nil {
		return c.Wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// discovery is the part of the provider's metadata the device flow uses.
type discovery struct {
	Issuer    string `json:"issuer"`
	DeviceURL string `json:"device_authorization_endpoint"`
	TokenURL  string `json:"token_endpoint"`
	JWKSURI   string `json:"jwks_uri"`
}

// Login runs the device authorization grant: it asks the provider for a device code, shows
// it through cfg.Prompt, and polls the token endpoint until the person approves (the
// session), denies (ErrDenied) or the code expires (ErrExpired), or ctx ends. The ID token
// is verified against the provider's JWKS before the session is returned.
func Login(ctx context.Context, cfg Config) (*Session, error) {
	s, err := deviceLogin(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("login %s: %w", cfg.Issuer, err)
	}
	return s, nil
}

func deviceLogin(ctx context.Context, cfg Config) (*Session, error) {
	disc, err := discover(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	scope := cfg.Scope
	if scope == "" {
		scope = DefaultScope
	}
	form := url.Values{"client_id": {cfg.clientID()}, "scope": {scope}}
	status, body, err := postForm(ctx, cfg, disc.DeviceURL, form)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	da, err := decodeDeviceAuth(status, body)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	poll := url.Values{"grant_type": {grantDeviceCode}, "device_code": {da.DeviceCode}, "client_id": {cfg.clientID()}}
	body, err = awaitDevice(ctx, cfg, da, func() (int, []byte, error) {
		return postForm(ctx, cfg, disc.TokenURL, poll)
	})
	if err != nil {
		return nil, err
	}
	tr, err := decodeTokenResponse(http.StatusOK, body)
	if err != nil {
		return nil, fmt.Errorf("poll token endpoint: %w", err)
	}
	return newSession(ctx, cfg, disc, tr, "")
}

// awaitDevice shows da through cfg.Prompt, then polls the token endpoint with poll every
// interval (RFC 8628 section 3.4, honouring slow_down) until it answers 200, whose body it
// returns, the person denies (ErrDenied), the code expires (ErrExpired) or ctx ends.
func awaitDevice(ctx context.Context, cfg Config, da deviceAuth, poll func() (int, []byte, error)) ([]byte, error) {
	if cfg.Prompt != nil {
		cfg.Prompt(Prompt{VerificationURI: da.VerificationURI, VerificationURIComplete: da.VerificationURIComplete,
			UserCode: da.UserCode, ExpiresIn: da.expiresIn})
	}
	deadline := cfg.now().Add(da.expiresIn)
	interval := da.interval
	for {
		if err := cfg.wait(ctx, interval); err != nil {
			return nil, fmt.Errorf("wait for approval: %w", err)
		}
		if cfg.now().After(deadline) {
			return nil, fmt.Errorf("wait for approval: %w (after %s)", ErrExpired, da.expiresIn)
		}
		status, body, err := poll()
		if err != nil {
			return nil, fmt.Errorf("poll token endpoint: %w", err)
		}
		err = decodeError(status, body)
		var oe *OAuthError
		if errors.As(err, &oe) {
			switch oe.Code {
			case "authorization_pending":
				continue
			case "slow_down":
				interval = min(interval+slowDownStep, MaxInterval)
				continue
			case "access_denied":
				return nil, fmt.Errorf("%w: %w", ErrDenied, oe)
			case "expired_token":
				return nil, fmt.Errorf("%w: %w", ErrExpired, oe)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("poll token endpoint: %w", err)
		}
		return body, nil
	}
}

// newSession verifies tr's ID token and builds the session; wantSub, when set, is the
// subject the token must name (a refresh must not change who is signed in).
func newSession(ctx context.Context, cfg Config, disc discovery, tr tokenResponse, wantSub string) (*Session, error) {
	v := &oidc.Verifier{Issuer: disc.Issuer, ClientID: cfg.clientID(), HTTPClient: cfg.HTTPClient, Now: cfg.Now}
	_, sub, err := v.VerifyIDToken(ctx, tr.IDToken)
	if err != nil {
		return nil, err
	}
	if wantSub != "" && sub != wantSub {
		return nil, fmt.Errorf("refreshed ID token names sub %q, the session %q", sub, wantSub)
	}
	exp, err := expiry(tr.IDToken)
	if err != nil {
		return nil, err
	}
	return &Session{Issuer: disc.Issuer, ClientID: cfg.clientID(), Subject: sub, IDToken: tr.IDToken,
		RefreshToken: tr.RefreshToken, Expiry: exp}, nil
}

// expiry reads the exp claim of a token already verified.
func expiry(raw string) (time.Time, error) {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA})
	if err != nil {
		return time.Time{}, fmt.Errorf("ID token: %w", err)
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return time.Time{}, fmt.Errorf("ID token: %w", err)
	}
	if c.Expiry == nil {
		return time.Time{}, errors.New("ID token: no exp")
	}
	return c.Expiry.Time(), nil
}

// discover reads the provider's metadata. The issuer it states must equal cfg.Issuer once
// both are normalized; its endpoints must be https (or loopback http).
func discover(ctx context.Context, cfg Config, device bool) (discovery, error) {
	var d discovery
	if err := oidc.CheckIssuer(cfg.Issuer); err != nil {
		return d, err
	}
	u := strings.TrimSuffix(cfg.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return d, fmt.Errorf("discovery: %w", redact.RequestError(err))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.httpClient().Do(req)
	if err != nil {
		return d, fmt.Errorf("discovery: %w", redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("discovery: get %s: status %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&d); err != nil {
		return d, fmt.Errorf("discovery: decode: %w", err)
	}
	want, err := NormalizeIssuer(cfg.Issuer)
	if err != nil {
		return d, err
	}
	if got, err := NormalizeIssuer(d.Issuer); err != nil || got != want {
		return d, fmt.Errorf("discovery: issuer %q, want %q", d.Issuer, cfg.Issuer)
	}
	if device {
		if d.DeviceURL == "" {
			return d, errors.New("discovery: the provider offers no device authorization (no device_authorization_endpoint)")
		}
		if err := oidc.CheckIssuer(d.DeviceURL); err != nil {
			return d, fmt.Errorf("discovery: device_authorization_endpoint: %w", err)
		}
	}
	if err := oidc.CheckIssuer(d.TokenURL); err != nil {
		return d, fmt.Errorf("discovery: token_endpoint: %w", err)
	}
	return d, nil
}

// postForm POSTs form (RFC 8628 and RFC 6749 use form bodies) and returns the status and
// at most maxBody bytes of the answer.
func postForm(ctx context.Context, cfg Config, u string, form url.Values) (int, []byte, error) {
	return post(ctx, cfg, u, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
}

// post POSTs body as contentType, accepting JSON, and returns the status and at most
// maxBody bytes of the answer.
func post(ctx context.Context, cfg Config, u, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("post %s: %w", u, redact.RequestError(err))
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.httpClient().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post %s: %w", u, redact.RequestError(err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("post %s: read: %w", u, err)
	}
	return resp.StatusCode, answer, nil
}
