// Package oidctest runs a real OpenID Connect issuer on a loopback port for tests: it serves
// discovery and a JWKS, signs ID tokens with Ed25519 (EdDSA), and implements the RFC 8628
// device authorization grant and the refresh token grant, with test hooks to approve or
// deny a user code and to mint ID tokens directly.
package oidctest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Endpoint paths under the issuer URL.
const (
	PathDiscovery = "/.well-known/openid-configuration"
	PathJWKS      = "/jwks"
	PathDevice    = "/device/code" // RFC 8628 device authorization endpoint
	PathToken     = "/token"
	PathVerify    = "/device" // the verification_uri a person would open
)

// GrantTypeDeviceCode is the grant_type of RFC 8628 token requests.
const GrantTypeDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// Issuer is a loopback OIDC provider. Set the fields before Start; they must not change
// afterwards. Its methods are safe for concurrent use.
type Issuer struct {
	ClientID      string           // the only client id accepted, and the aud of its tokens; "" means "cotal"
	AutoApprove   string           // non-empty: every device code is approved for this subject after its first poll
	AutoDeny      bool             // every device code is denied after its first poll (when AutoApprove is empty)
	TokenTTL      time.Duration    // lifetime of an ID token; 0 means 1 h
	DeviceCodeTTL time.Duration    // lifetime of a device code; 0 means 10 min
	Interval      time.Duration    // announced poll interval, whole seconds; 0 means 1 s
	Now           func() time.Time // nil means time.Now

	// URL is the issuer URL (http://127.0.0.1:<port>), set by Start.
	URL string

	lb        loopback
	mu        sync.Mutex
	byDevice  map[string]*device
	byUser    map[string]*device
	refresh   map[string]string // refresh token -> subject
	refreshes int               // successful refresh grants
}

// device is one device authorization in flight.
type device struct {
	code, userCode string
	expires        time.Time
	interval       time.Duration
	lastPoll       time.Time // issuance, then each poll
	polls          int
	subject        string // approved for; "" while pending
	denied         bool
}

// Start serves the issuer on 127.0.0.1 at a free port, failing t when it cannot, and
// closes it when the test ends. iss may be nil for the defaults; Start returns it.
func Start(t testing.TB, iss *Issuer) *Issuer {
	t.Helper()
	if iss == nil {
		iss = &Issuer{}
	}
	startForTest(t, iss, "oidc test issuer")
	return iss
}

// Start generates the signing key, listens on 127.0.0.1 at a free port, sets URL and
// serves until Close.
func (i *Issuer) Start() error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathDiscovery, i.serveDiscovery)
	mux.HandleFunc("GET "+PathJWKS, i.serveJWKS)
	mux.HandleFunc("POST "+PathDevice, i.serveDevice)
	mux.HandleFunc("POST "+PathToken, i.serveToken)
	mux.HandleFunc("GET "+PathVerify, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "oidctest: approve the user code through the test API")
	})
	return i.lb.start(mux, func(origin string) {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.URL = origin
		i.byDevice = map[string]*device{}
		i.byUser = map[string]*device{}
		i.refresh = map[string]string{}
	})
}

// Close stops the server and waits until it has stopped. It is a no-op before Start.
func (i *Issuer) Close() error { return i.lb.stop() }

func (i *Issuer) clientID() string {
	if i.ClientID == "" {
		return "cotal"
	}
	return i.ClientID
}

func (i *Issuer) now() time.Time {
	if i.Now != nil {
		return i.Now()
	}
	return time.Now()
}

func (i *Issuer) tokenTTL() time.Duration {
	if i.TokenTTL <= 0 {
		return time.Hour
	}
	return i.TokenTTL
}

// Approve lets the device authorization showing userCode finish for subject.
func (i *Issuer) Approve(userCode, subject string) error {
	if subject == "" {
		return errors.New("oidctest: approve: empty subject")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	d := i.byUser[userCode]
	if d == nil {
		return fmt.Errorf("oidctest: approve: no pending user code %q", userCode)
	}
	d.subject, d.denied = subject, false
	return nil
}

// Deny makes the device authorization showing userCode end in access_denied.
func (i *Issuer) Deny(userCode string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	d := i.byUser[userCode]
	if d == nil {
		return fmt.Errorf("oidctest: deny: no pending user code %q", userCode)
	}
	d.subject, d.denied = "", true
	return nil
}

// Revoke invalidates every refresh token of subject: the next refresh gets invalid_grant.
func (i *Issuer) Revoke(subject string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for rt, sub := range i.refresh {
		if sub == subject {
			delete(i.refresh, rt)
		}
	}
}

// Refreshes returns how many refresh token grants succeeded.
func (i *Issuer) Refreshes() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.refreshes
}

// IDToken mints an ID token for subject as the token endpoint would: iss URL, aud the
// client id, iat now and exp now + TokenTTL.
func (i *Issuer) IDToken(subject string) (string, error) {
	now := i.now()
	return i.Sign(jwt.Claims{
		Issuer: i.URL, Subject: subject, Audience: jwt.Audience{i.clientID()},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(i.tokenTTL())),
		ID: randString(12),
	})
}

// Sign signs claims (a jwt.Claims, a map, or any JSON-encodable struct) as a JWT with the
// issuer's published key, for tokens a test crafts (expired, wrong audience ...).
func (i *Issuer) Sign(claims any) (string, error) {
	return i.lb.sign("issuer", claims, nil)
}

func (i *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                i.URL,
		"jwks_uri":                              i.URL + PathJWKS,
		"device_authorization_endpoint":         i.URL + PathDevice,
		"token_endpoint":                        i.URL + PathToken,
		"grant_types_supported":                 []string{GrantTypeDeviceCode, "refresh_token"},
		"id_token_signing_alg_values_supported": []string{string(jose.EdDSA)},
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
	})
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	k := i.lb.jwk()
	k.Use = "sig"
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k}})
}

// clientForm parses a form POST and checks its client_id; on a refusal it has answered w
// and returns false.
func (i *Issuer) clientForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "form body: "+err.Error())
		return false
	}
	if r.PostForm.Get("client_id") != i.clientID() {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client_id")
		return false
	}
	return true
}

// serveDevice is the RFC 8628 section 3.1 device authorization endpoint.
func (i *Issuer) serveDevice(w http.ResponseWriter, r *http.Request) {
	if !i.clientForm(w, r) {
		return
	}
	ttl := i.DeviceCodeTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	interval := i.Interval.Round(time.Second)
	if interval <= 0 {
		interval = time.Second
	}
	now := i.now()
	d := &device{code: randString(32), userCode: userCode(), expires: now.Add(ttl), interval: interval, lastPoll: now}
	i.mu.Lock()
	i.byDevice[d.code] = d
	i.byUser[d.userCode] = d
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               d.code,
		"user_code":                 d.userCode,
		"verification_uri":          i.URL + PathVerify,
		"verification_uri_complete": i.URL + PathVerify + "?user_code=" + d.userCode,
		"expires_in":                int(ttl / time.Second),
		"interval":                  int(interval / time.Second),
	})
}

// serveToken is the token endpoint for the device code and refresh token grants.
func (i *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	if !i.clientForm(w, r) {
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case GrantTypeDeviceCode:
		i.deviceGrant(w, r.PostForm.Get("device_code"))
	case "refresh_token":
		i.refreshGrant(w, r.PostForm.Get("refresh_token"))
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type "+gt)
	}
}

// deviceGrant answers one poll of RFC 8628 section 3.4 with the section 3.5 errors.
func (i *Issuer) deviceGrant(w http.ResponseWriter, code string) {
	now := i.now()
	i.mu.Lock()
	d := i.byDevice[code]
	if d == nil {
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown device_code")
		return
	}
	if now.After(d.expires) {
		i.forget(d)
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "expired_token", "device_code expired")
		return
	}
	tooFast := now.Sub(d.lastPoll) < d.interval
	d.lastPoll = now
	d.polls++
	if tooFast {
		d.interval += 5 * time.Second
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "slow_down", "polled faster than the interval")
		return
	}
	if d.denied {
		i.forget(d)
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "access_denied", "the user denied the request")
		return
	}
	if d.subject == "" {
		if i.AutoApprove != "" {
			d.subject = i.AutoApprove // granted from the next poll on
		} else if i.AutoDeny {
			d.denied = true
		}
		i.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "authorization_pending", "waiting for the user")
		return
	}
	i.forget(d)
	sub := d.subject
	i.mu.Unlock()
	i.issue(w, sub)
}

// forget drops d; the caller holds i.mu.
func (i *Issuer) forget(d *device) {
	delete(i.byDevice, d.code)
	delete(i.byUser, d.userCode)
}

// refreshGrant rotates the refresh token and issues a new ID token.
func (i *Issuer) refreshGrant(w http.ResponseWriter, rt string) {
	i.mu.Lock()
	sub, ok := i.refresh[rt]
	if ok {
		delete(i.refresh, rt)
		i.refreshes++
	}
	i.mu.Unlock()
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or revoked refresh_token")
		return
	}
	i.issue(w, sub)
}

// issue writes a token response with a new ID token and refresh token for sub.
func (i *Issuer) issue(w http.ResponseWriter, sub string) {
	idt, err := i.IDToken(sub)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	rt := randString(32)
	i.mu.Lock()
	i.refresh[rt] = sub
	i.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  randString(32),
		"token_type":    "Bearer",
		"expires_in":    int(i.tokenTTL() / time.Second),
		"refresh_token": rt,
		"id_token":      idt,
	})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

// randString returns n random bytes, base64url without padding.
func randString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// userCode returns a code like "BCDF-GHJK" from consonants (RFC 8628 section 6.1).
func userCode() string {
	const alphabet = "BCDFGHJKLMNPQRSTVWXZ"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	var s strings.Builder
	for n, c := range b {
		if n == 4 {
			s.WriteByte('-')
		}
		s.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return s.String()
}

// PendingUserCodes returns the user codes of device authorizations not yet finished.
func (i *Issuer) PendingUserCodes() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []string
	for uc, d := range i.byUser {
		if d.subject == "" && !d.denied {
			out = append(out, uc)
		}
	}
	return out
}

// WaitPending blocks until a device authorization is pending and returns its user code,
// or returns ctx's error.
func (i *Issuer) WaitPending(ctx context.Context) (string, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if codes := i.PendingUserCodes(); len(codes) > 0 {
			return codes[0], nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("oidctest: wait for a device authorization: %w", ctx.Err())
		case <-t.C:
		}
	}
}
