package devicelogin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// OAuthError is an error answer of the provider (RFC 6749 section 5.2, RFC 8628 section 3.5).
type OAuthError struct {
	Status      int    // HTTP status
	Code        string // the error field, e.g. "invalid_grant"
	Description string // error_description, may be empty
}

// Error returns "provider says <code>[: <description>]".
func (e *OAuthError) Error() string {
	msg := "provider says " + e.Code
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

// tokenResponse is a successful token endpoint answer.
type tokenResponse struct {
	IDToken      string `json:"id_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
}

// decodeTokenResponse reads a token endpoint answer: an *OAuthError for a JSON error body,
// the response for a 200 with an id_token, another error otherwise.
func decodeTokenResponse(status int, body []byte) (tokenResponse, error) {
	var tr tokenResponse
	if err := decodeError(status, body); err != nil {
		return tr, err
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return tr, fmt.Errorf("token response: %w", err)
	}
	if tr.IDToken == "" {
		return tr, errors.New("token response: no id_token (is the openid scope allowed for this client?)")
	}
	if len(tr.IDToken) > 16<<10 || len(tr.RefreshToken) > 16<<10 {
		return tr, errors.New("token response: token longer than 16 KiB")
	}
	return tr, nil
}

// decodeError returns nil for a 200, an *OAuthError for a body with an error code, and a
// plain error naming the status otherwise.
func decodeError(status int, body []byte) error {
	if status == http.StatusOK {
		return nil
	}
	var e struct {
		Code        string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return &OAuthError{Status: status, Code: e.Code, Description: e.Description}
	}
	return fmt.Errorf("status %d %s", status, http.StatusText(status))
}

// deviceAuth is a device authorization answer (RFC 8628 section 3.2), checked.
type deviceAuth struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                *int64 `json:"interval"`

	expiresIn, interval time.Duration
}

// decodeDeviceAuth reads and checks a device authorization answer: codes present, URIs
// http(s), 0 < expires_in ≤ MaxDeviceCodeLifetime, 0 ≤ interval ≤ MaxInterval (absent or
// 0 means 5 s, as RFC 8628 says).
func decodeDeviceAuth(status int, body []byte) (deviceAuth, error) {
	var da deviceAuth
	if err := decodeError(status, body); err != nil {
		return da, err
	}
	if err := json.Unmarshal(body, &da); err != nil {
		return da, fmt.Errorf("decode: %w", err)
	}
	if da.DeviceCode == "" || da.UserCode == "" {
		return da, errors.New("no device_code or user_code")
	}
	if len(da.UserCode) > 64 || !printable(da.UserCode) {
		return da, errors.New("user_code: want at most 64 printable characters")
	}
	if err := checkShownURL(da.VerificationURI); err != nil {
		return da, fmt.Errorf("verification_uri: %w", err)
	}
	if da.VerificationURIComplete != "" {
		if err := checkShownURL(da.VerificationURIComplete); err != nil {
			return da, fmt.Errorf("verification_uri_complete: %w", err)
		}
	}
	if da.ExpiresIn <= 0 || da.ExpiresIn > int64(MaxDeviceCodeLifetime/time.Second) {
		return da, fmt.Errorf("expires_in %d: want 1 to %d seconds", da.ExpiresIn, int64(MaxDeviceCodeLifetime/time.Second))
	}
	da.expiresIn = time.Duration(da.ExpiresIn) * time.Second
	da.interval = defaultInterval
	if da.Interval != nil {
		if *da.Interval < 0 || *da.Interval > int64(MaxInterval/time.Second) {
			return da, fmt.Errorf("interval %d: want 0 to %d seconds", *da.Interval, int64(MaxInterval/time.Second))
		}
		if *da.Interval > 0 {
			da.interval = time.Duration(*da.Interval) * time.Second
		}
	}
	return da, nil
}

// checkShownURL accepts an absolute http(s) URL that is safe to print on a terminal.
func checkShownURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || len(u) > 2048 || !printable(u) {
		return fmt.Errorf("%q: want an absolute http(s) URL", u)
	}
	return nil
}

// printable reports whether s has no control characters (it is shown on a terminal).
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return false
		}
	}
	return true
}
