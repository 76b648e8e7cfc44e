package devicelogin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
)

// Refresh trades s's refresh token for a new ID token (and the provider's new refresh
// token, if it rotates them) and returns the new session; s is not changed. A refusal by
// the provider is an *OAuthError (invalid_grant: the refresh token is no longer valid).
func Refresh(ctx context.Context, cfg Config, s *Session) (*Session, error) {
	ns, err := refresh(ctx, cfg, s)
	if err != nil {
		return nil, fmt.Errorf("refresh %s: %w", cfg.Issuer, err)
	}
	return ns, nil
}

func refresh(ctx context.Context, cfg Config, s *Session) (*Session, error) {
	if s.RefreshToken == "" {
		return nil, errors.New("the session has no refresh token")
	}
	disc, err := discover(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {s.RefreshToken}, "client_id": {cfg.clientID()}}
	status, body, err := postForm(ctx, cfg, disc.TokenURL, form)
	if err != nil {
		return nil, err
	}
	tr, err := decodeTokenResponse(status, body)
	if err != nil {
		return nil, err
	}
	if tr.RefreshToken == "" {
		tr.RefreshToken = s.RefreshToken // the provider does not rotate them
	}
	return newSession(ctx, cfg, disc, tr, s.Subject)
}

// Token returns a fresh ID token for cfg.Issuer from the session in st: the stored one
// while it is valid for more than RefreshMargin, else a refreshed one (saved back to st).
// Processes refresh one at a time, each first reading what the one before saved.
// With no session, a session for another client id, or a refresh token the provider
// refuses (invalid_grant), the error wraps ErrLoginRequired and says which cotal login
// command to run.
func Token(ctx context.Context, cfg Config, st Store) (string, error) {
	s, err := st.Load(cfg.Issuer)
	if errors.Is(err, ErrNoSession) {
		return "", loginRequired(cfg, "no login session")
	}
	if err != nil {
		return "", err
	}
	if s.ClientID != cfg.clientID() {
		return "", loginRequired(cfg, fmt.Sprintf("the session is for client id %q", s.ClientID))
	}
	if fresh(cfg, s) {
		return s.IDToken, nil
	}
	unlock, err := st.lock(ctx, cfg.Issuer)
	if err != nil {
		return "", err
	}
	defer unlock()
	s, err = st.Load(cfg.Issuer) // another process may have refreshed it meanwhile
	if errors.Is(err, ErrNoSession) {
		return "", loginRequired(cfg, "no login session")
	}
	if err != nil {
		return "", err
	}
	if fresh(cfg, s) {
		return s.IDToken, nil
	}
	if s.RefreshToken == "" {
		return "", loginRequired(cfg, "the ID token expired and the session has no refresh token")
	}
	ns, err := Refresh(ctx, cfg, s)
	var oe *OAuthError
	if errors.As(err, &oe) && oe.Code == "invalid_grant" {
		return "", loginRequired(cfg, "the provider refused the refresh token ("+oe.Error()+")")
	}
	if err != nil {
		return "", err
	}
	if err := st.Save(ns); err != nil {
		return "", err
	}
	return ns.IDToken, nil
}

// IDToken returns a fresh ID token for issuer and clientID ("" means DefaultClientID) from
// the sessions stored in dir by cotal login; see Token.
func IDToken(ctx context.Context, dir, issuer, clientID string) (string, error) {
	return Token(ctx, Config{Issuer: issuer, ClientID: clientID}, Store{Dir: dir})
}

func fresh(cfg Config, s *Session) bool {
	return cfg.now().Add(RefreshMargin).Before(s.Expiry)
}

// loginRequired builds the error that sends the person to cotal login.
func loginRequired(cfg Config, why string) error {
	next := "cotal login --idp " + cfg.Issuer
	if cfg.clientID() != DefaultClientID {
		next += " --client-id " + cfg.clientID()
	}
	return fmt.Errorf("%w for %s: %s; run `%s`", ErrLoginRequired, cfg.Issuer, why, next)
}
