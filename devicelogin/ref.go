package devicelogin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/oidc"
)

// This file is the sign-in of an IdP pinned the reference's way (no client id; reference
// implementations/auth/src/login.ts): the device flow against <base>/device/code and
// <base>/device/token with JSON bodies, answering an opaque, revocable IdP session token;
// that session, never an ID token, is kept, and a fresh short-lived ID token is fetched
// from GET <base>/token (Authorization: Bearer <session>, answer {token}) for every use.

const (
	// RefDefaultClientID is the client id the reference's `cotal login` presents by default.
	RefDefaultClientID = "cotal-cli"
	// RefSessionsFile is the file, in the login folder, keeping reference sessions in the
	// reference's idp-sessions.json form: {ver: 1, sessions: {<base URL>: {token, expiresAt, sub?}}}.
	RefSessionsFile = "idp-sessions.json"
	// maxSessionLifetime bounds the expires_in of a session, as the reference does.
	maxSessionLifetime = 365 * 24 * time.Hour
)

// RefConfig names a reference IdP and holds the seams tests replace. The zero value of
// each optional field is documented beside it.
type RefConfig struct {
	URL        string                                           // the IdP's base URL; required (see oidc.NormalizeIdPURL)
	ClientID   string                                           // "" means RefDefaultClientID
	HTTPClient *http.Client                                     // nil means a client with a 30 s timeout
	Prompt     func(Prompt)                                     // shows the code to the person; nil shows nothing
	Wait       func(ctx context.Context, d time.Duration) error // waits between polls; nil means a timer bounded by ctx
	Now        func() time.Time                                 // nil means time.Now
}

// RefSession is a person signed in at a reference IdP, as kept in RefSessionsFile.
type RefSession struct {
	Token     string `json:"token"`         // the IdP session token (opaque)
	ExpiresAt int64  `json:"expiresAt"`     // unix seconds; advisory
	Sub       string `json:"sub,omitempty"` // the subject its ID tokens name
}

// config is cfg as a Config, for the helpers both flows share.
func (cfg RefConfig) config() Config {
	return Config{Issuer: cfg.URL, ClientID: cfg.ClientID, HTTPClient: cfg.HTTPClient, Prompt: cfg.Prompt, Wait: cfg.Wait, Now: cfg.Now}
}

func (cfg RefConfig) clientID() string {
	if cfg.ClientID == "" {
		return RefDefaultClientID
	}
	return cfg.ClientID
}

// RefLogin runs the reference's device flow at cfg.URL and proves the session by fetching
// one ID token from it, whose subject the session records. The session is returned, not
// saved. Errors wrap ErrDenied and ErrExpired as Login's do.
func RefLogin(ctx context.Context, cfg RefConfig) (*RefSession, error) {
	s, err := refLogin(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("login %s: %w", cfg.URL, err)
	}
	return s, nil
}

func refLogin(ctx context.Context, cfg RefConfig) (*RefSession, error) {
	base, err := oidc.NormalizeIdPURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	c := cfg.config()
	status, body, err := postJSON(ctx, c, base+"/device/code", map[string]string{"client_id": cfg.clientID()})
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	da, err := decodeDeviceAuth(status, body)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	poll := map[string]string{"grant_type": grantDeviceCode, "device_code": da.DeviceCode, "client_id": cfg.clientID()}
	body, err = awaitDevice(ctx, c, da, func() (int, []byte, error) {
		return postJSON(ctx, c, base+"/device/token", poll)
	})
	if err != nil {
		return nil, err
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("token response: %w", err)
	}
	if tr.AccessToken == "" || len(tr.AccessToken) > 16<<10 || tr.ExpiresIn <= 0 || tr.ExpiresIn > int64(maxSessionLifetime/time.Second) {
		return nil, errors.New("token response: malformed (want access_token and 0 < expires_in <= 1 year)")
	}
	if looksLikeJWT(tr.AccessToken) {
		return nil, errors.New("token response: the device access token is a JWT; the session must be an opaque revocable handle, so it is not kept")
	}
	s := &RefSession{Token: tr.AccessToken, ExpiresAt: c.now().Unix() + tr.ExpiresIn}
	idt, err := RefFetchIDToken(ctx, cfg, s.Token)
	if err != nil {
		return nil, err
	}
	sub, err := unverifiedSubject(idt)
	if err != nil {
		return nil, fmt.Errorf("the ID token of the new session: %w", err)
	}
	s.Sub = sub
	return s, nil
}

// RefFetchIDToken trades the session token for a fresh ID token at GET <base>/token. A 401
// (the session expired or was revoked at the IdP) wraps ErrLoginRequired.
func RefFetchIDToken(ctx context.Context, cfg RefConfig, session string) (string, error) {
	base, err := oidc.NormalizeIdPURL(cfg.URL)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/token", nil)
	if err != nil {
		return "", fmt.Errorf("idp session: %w", redact.RequestError(err))
	}
	req.Header.Set("Authorization", "Bearer "+session)
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.config().httpClient().Do(req)
	if err != nil {
		return "", fmt.Errorf("idp session: %w", redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("%w for %s: the IdP refused the kept session (expired or revoked); run `cotal login --idp %s`", ErrLoginRequired, base, base)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("idp session: %s/token: status %s", base, resp.Status)
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&body); err != nil {
		return "", fmt.Errorf("idp session: %s/token: decode: %w", base, err)
	}
	if body.Token == "" {
		return "", fmt.Errorf("idp session: %s/token returned no token", base)
	}
	return body.Token, nil
}

// RefIDToken returns a fresh ID token of the reference IdP at url from the session kept in
// dir by cotal login; with none, or one the IdP refuses, the error wraps ErrLoginRequired.
func RefIDToken(ctx context.Context, dir, url string) (string, error) {
	s, err := (Store{Dir: dir}).LoadRef(url)
	if errors.Is(err, ErrNoSession) {
		return "", fmt.Errorf("%w for %s: no login session; run `cotal login --idp %s`", ErrLoginRequired, url, url)
	}
	if err != nil {
		return "", err
	}
	return RefFetchIDToken(ctx, RefConfig{URL: url}, s.Token)
}

// refSessions is RefSessionsFile.
type refSessions struct {
	Ver      int                   `json:"ver"`
	Sessions map[string]RefSession `json:"sessions"`
}

func (s Store) readRef() (refSessions, string, error) {
	p := filepath.Join(s.Dir, RefSessionsFile)
	f := refSessions{Ver: 1, Sessions: map[string]RefSession{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return f, p, nil
	}
	if err != nil {
		return f, p, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, p, fmt.Errorf("%s: not valid JSON (%w); delete it and run cotal login again", p, err)
	}
	if f.Ver != 1 {
		return f, p, fmt.Errorf("%s: version %d, want 1", p, f.Ver)
	}
	if f.Sessions == nil {
		f.Sessions = map[string]RefSession{}
	}
	return f, p, nil
}

// LoadRef reads the reference session of the IdP at url; it wraps ErrNoSession when there
// is none.
func (s Store) LoadRef(url string) (*RefSession, error) {
	key, err := oidc.NormalizeIdPURL(url)
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	f, p, err := s.readRef()
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	sess, ok := f.Sessions[key]
	if !ok {
		return nil, fmt.Errorf("load session of %s: %w", key, ErrNoSession)
	}
	if sess.Token == "" {
		return nil, fmt.Errorf("%s: the session of %s is malformed; run `cotal login --idp %s`", p, key, key)
	}
	return &sess, nil
}

// SaveRef keeps sess as the session of the IdP at url, replacing any earlier one; the
// file is written atomically (0600, in a 0700 folder).
func (s Store) SaveRef(url string, sess *RefSession) error {
	key, err := oidc.NormalizeIdPURL(url)
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	if err := s.mkdir(); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	f, p, err := s.readRef()
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	f.Sessions[key] = *sess
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	if err := writeAtomic(p, b); err != nil {
		return fmt.Errorf("save session of %s: %w", key, err)
	}
	return nil
}

// postJSON POSTs fields as a JSON body (the reference's IdP refuses form bodies) and
// returns the status and at most maxBody bytes of the answer.
func postJSON(ctx context.Context, cfg Config, u string, fields map[string]string) (int, []byte, error) {
	b, err := json.Marshal(fields)
	if err != nil {
		return 0, nil, err
	}
	return post(ctx, cfg, u, "application/json", bytes.NewReader(b))
}

// looksLikeJWT reports whether s parses as a compact JWS.
func looksLikeJWT(s string) bool {
	if strings.Count(s, ".") != 2 {
		return false
	}
	_, err := jwt.ParseSigned(s, parseAlgs)
	return err == nil
}

// parseAlgs are what unverifiedSubject and looksLikeJWT parse; neither checks a signature.
var parseAlgs = []jose.SignatureAlgorithm{jose.EdDSA, jose.RS256, jose.ES256, jose.PS256, jose.HS256}

// unverifiedSubject reads the sub of an ID token without checking it: what the session
// shows; the auth service verifies every token it is given.
func unverifiedSubject(raw string) (string, error) {
	tok, err := jwt.ParseSigned(raw, parseAlgs)
	if err != nil {
		return "", fmt.Errorf("not a JWT: %w", err)
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return "", err
	}
	if c.Subject == "" {
		return "", errors.New("no sub")
	}
	return c.Subject, nil
}

// IsOIDC tells whether the IdP at url is an OIDC provider for Login, not a reference IdP
// for RefLogin: it serves <url>/.well-known/openid-configuration naming url as its issuer.
// A reference IdP (issuer = its origin, no discovery at its base URL) answers otherwise.
// An error means the IdP could not be asked at all.
func IsOIDC(ctx context.Context, cfg Config) (bool, error) {
	if err := oidc.CheckIssuer(cfg.Issuer); err != nil {
		if _, nerr := oidc.NormalizeIdPURL(cfg.Issuer); nerr != nil {
			return false, err
		}
		return false, nil
	}
	u := strings.TrimSuffix(cfg.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("discovery: %w", redact.RequestError(err))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := cfg.httpClient().Do(req)
	if err != nil {
		return false, fmt.Errorf("discovery: %w", redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, nil
	}
	var d discovery
	if json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&d) != nil {
		return false, nil
	}
	want, err := NormalizeIssuer(cfg.Issuer)
	if err != nil {
		return false, nil
	}
	got, err := NormalizeIssuer(d.Issuer)
	return err == nil && got == want, nil
}
