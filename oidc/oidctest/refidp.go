package oidctest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// RefBasePath is where a RefIdP serves its auth API, as Better Auth does (<origin>/api/auth).
const RefBasePath = "/api/auth"

// RefIdP is a loopback IdP of the kind the TypeScript reference pins with `cotal up
// --user-auth --idp <base>` (Better Auth with its JWT and device authorization plugins):
// under the base URL it serves /jwks (Ed25519), the device flow /device/code and
// /device/token with JSON bodies, answering an opaque session token, GET /token which
// trades that session for a user JWT {token} (iss = aud = the origin, EdDSA), and POST
// /sign-out. Set the fields before Start; they must not change afterwards.
type RefIdP struct {
	ClientID      string           // the only client id the device flow accepts; "" means "cotal-cli", the reference's default
	AutoApprove   string           // non-empty: every device code is approved for this subject after its first poll
	TokenTTL      time.Duration    // lifetime of a user JWT; 0 means 15 min
	SessionTTL    time.Duration    // lifetime of a session; 0 means 7 days
	DeviceCodeTTL time.Duration    // 0 means 10 min
	Interval      time.Duration    // announced poll interval, whole seconds; 0 means 1 s
	Now           func() time.Time // nil means time.Now

	// Origin is http://127.0.0.1:<port>, the iss and aud of its tokens; URL is the base
	// Origin + RefBasePath. Both are set by Start.
	Origin, URL string

	lb       loopback
	mu       sync.Mutex
	byDevice map[string]*device
	byUser   map[string]*device
	sessions map[string]string // session token -> subject
}

// StartRef serves a RefIdP on 127.0.0.1 at a free port, failing t when it cannot, and
// closes it when the test ends. p may be nil for the defaults; StartRef returns it.
func StartRef(t testing.TB, p *RefIdP) *RefIdP {
	t.Helper()
	if p == nil {
		p = &RefIdP{}
	}
	startForTest(t, p, "reference test idp")
	return p
}

// Start generates the signing key, listens on 127.0.0.1 at a free port, sets Origin and
// URL and serves until Close.
func (p *RefIdP) Start() error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+RefBasePath+"/jwks", p.serveJWKS)
	mux.HandleFunc("POST "+RefBasePath+"/device/code", p.serveDevice)
	mux.HandleFunc("POST "+RefBasePath+"/device/token", p.serveDeviceToken)
	mux.HandleFunc("GET "+RefBasePath+"/token", p.serveToken)
	mux.HandleFunc("POST "+RefBasePath+"/sign-out", p.serveSignOut)
	return p.lb.start(mux, func(origin string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.Origin = origin
		p.URL = origin + RefBasePath
		p.byDevice = map[string]*device{}
		p.byUser = map[string]*device{}
		p.sessions = map[string]string{}
	})
}

// Close stops the server and waits until it has stopped. It is a no-op before Start.
func (p *RefIdP) Close() error { return p.lb.stop() }

func (p *RefIdP) clientID() string {
	if p.ClientID == "" {
		return "cotal-cli"
	}
	return p.ClientID
}

func (p *RefIdP) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// IDToken mints a user JWT for subject as GET /token does: iss and aud the origin, iat now,
// exp now + TokenTTL.
func (p *RefIdP) IDToken(subject string) (string, error) {
	ttl := p.TokenTTL
	if ttl <= 0 {
		ttl = 15 * time.Minute
	}
	now := p.now()
	return p.Sign(jwt.Claims{Issuer: p.Origin, Subject: subject, Audience: jwt.Audience{p.Origin},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl))})
}

// Sign signs claims with the published key (EdDSA, its kid), for tokens a test crafts.
func (p *RefIdP) Sign(claims any) (string, error) {
	return p.SignWith(claims, nil)
}

// SignWith signs claims with the published key, adding the extra protected headers.
func (p *RefIdP) SignWith(claims any, headers map[string]any) (string, error) {
	return p.lb.sign("idp", claims, headers)
}

// KeyID is the kid of the published key.
func (p *RefIdP) KeyID() string { return p.lb.keyID() }

// Approve lets the device authorization showing userCode finish for subject.
func (p *RefIdP) Approve(userCode, subject string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.byUser[userCode]
	if d == nil || subject == "" {
		return fmt.Errorf("oidctest: approve: no pending user code %q (or empty subject)", userCode)
	}
	d.subject = subject
	return nil
}

// SignOutAll ends every session: the next GET /token is 401.
func (p *RefIdP) SignOutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.sessions)
}

func (p *RefIdP) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{p.lb.jwk()}})
}

// jsonBody decodes a JSON POST body and checks its client_id; on a refusal it has answered w.
func (p *RefIdP) jsonBody(w http.ResponseWriter, r *http.Request, dst *map[string]string) bool {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"message": "content-type must be application/json"})
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(dst); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "json body: "+err.Error())
		return false
	}
	if (*dst)["client_id"] != p.clientID() {
		oauthError(w, http.StatusBadRequest, "invalid_client", "unknown client_id")
		return false
	}
	return true
}

func (p *RefIdP) serveDevice(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	if !p.jsonBody(w, r, &body) {
		return
	}
	ttl := p.DeviceCodeTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	interval := p.Interval.Round(time.Second)
	if interval <= 0 {
		interval = time.Second
	}
	now := p.now()
	d := &device{code: randString(32), userCode: userCode(), expires: now.Add(ttl), interval: interval, lastPoll: now}
	p.mu.Lock()
	p.byDevice[d.code] = d
	p.byUser[d.userCode] = d
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               d.code,
		"user_code":                 d.userCode,
		"verification_uri":          p.URL + "/device",
		"verification_uri_complete": p.URL + "/device?user_code=" + d.userCode,
		"expires_in":                int(ttl / time.Second),
		"interval":                  int(interval / time.Second),
	})
}

func (p *RefIdP) serveDeviceToken(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	if !p.jsonBody(w, r, &body) {
		return
	}
	if body["grant_type"] != GrantTypeDeviceCode {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type "+body["grant_type"])
		return
	}
	now := p.now()
	p.mu.Lock()
	d := p.byDevice[body["device_code"]]
	switch {
	case d == nil:
		p.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown device_code")
		return
	case now.After(d.expires):
		p.forget(d)
		p.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "expired_token", "device_code expired")
		return
	case d.subject == "":
		if p.AutoApprove != "" {
			d.subject = p.AutoApprove // granted from the next poll on
		}
		p.mu.Unlock()
		oauthError(w, http.StatusBadRequest, "authorization_pending", "waiting for the user")
		return
	}
	p.forget(d)
	session := randString(24) // opaque, never a JWT
	p.sessions[session] = d.subject
	p.mu.Unlock()
	ttl := p.SessionTTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": session, "token_type": "Bearer", "expires_in": int(ttl / time.Second)})
}

// forget drops d; the caller holds p.mu.
func (p *RefIdP) forget(d *device) {
	delete(p.byDevice, d.code)
	delete(p.byUser, d.userCode)
}

func (p *RefIdP) session(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sub, ok := p.sessions[tok]
	return sub, ok
}

func (p *RefIdP) serveToken(w http.ResponseWriter, r *http.Request) {
	sub, ok := p.session(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "unauthorized"})
		return
	}
	tok, err := p.IDToken(sub)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"token": tok})
}

func (p *RefIdP) serveSignOut(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	_, ok := p.sessions[tok]
	delete(p.sessions, tok)
	p.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "unauthorized"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}
