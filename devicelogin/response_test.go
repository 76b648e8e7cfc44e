package devicelogin

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var tokenResponses = []struct {
	status int
	body   string
	code   string // OAuth error code; "ok" for success, "" for another error
}{
	{200, `{"id_token":"a.b.c","refresh_token":"r","token_type":"Bearer","expires_in":3600}`, "ok"},
	{200, `{"id_token":"a.b.c"}`, "ok"},
	{200, `{"access_token":"x"}`, ""},
	{200, `not json`, ""},
	{400, `{"error":"authorization_pending"}`, "authorization_pending"},
	{400, `{"error":"slow_down","error_description":"easy"}`, "slow_down"},
	{400, `{"error":"access_denied"}`, "access_denied"},
	{400, `{"error":"expired_token"}`, "expired_token"},
	{400, `{"error":"invalid_grant"}`, "invalid_grant"},
	{401, `{"error":"invalid_client"}`, "invalid_client"},
	{500, `<html>oops</html>`, ""},
	{400, `{"error":""}`, ""},
	{200, `{"id_token":` + `"` + strings.Repeat("a", 20000) + `"}`, ""},
}

func TestLoginDecodeTokenResponse(t *testing.T) {
	for _, c := range tokenResponses {
		tr, err := decodeTokenResponse(c.status, []byte(c.body))
		var oe *OAuthError
		switch {
		case c.code == "ok":
			if err != nil || tr.IDToken != "a.b.c" {
				t.Errorf("%d %s: %+v, %v", c.status, c.body, tr, err)
			}
		case c.code != "":
			if !errors.As(err, &oe) || oe.Code != c.code || oe.Status != c.status {
				t.Errorf("%d %s: %v, want OAuth error %s", c.status, c.body, err, c.code)
			}
		default:
			if err == nil || errors.As(err, &oe) {
				t.Errorf("%d %.40s: %v, want a plain error", c.status, c.body, err)
			}
		}
	}
}

func FuzzDecodeTokenResponse(f *testing.F) {
	for _, c := range tokenResponses {
		f.Add(c.status, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		tr, err := decodeTokenResponse(status, body)
		if err == nil && (status != http.StatusOK || tr.IDToken == "") {
			t.Fatalf("accepted %d %q as %+v", status, body, tr)
		}
		var oe *OAuthError
		if errors.As(err, &oe) && (oe.Code == "" || status == http.StatusOK) {
			t.Fatalf("OAuth error %+v from %d %q", oe, status, body)
		}
	})
}

var deviceAuths = []struct {
	body string
	ok   bool
}{
	{`{"device_code":"d","user_code":"BCDF-GHJK","verification_uri":"https://idp.example.com/device","verification_uri_complete":"https://idp.example.com/device?user_code=BCDF-GHJK","expires_in":600,"interval":5}`, true},
	{`{"device_code":"d","user_code":"U","verification_uri":"http://127.0.0.1:1/device","expires_in":86400}`, true},
	{`{"device_code":"d","user_code":"U","verification_uri":"https://x/device","expires_in":86401}`, false},
	{`{"device_code":"d","user_code":"U","verification_uri":"https://x/device","expires_in":0}`, false},
	{`{"device_code":"d","user_code":"U","verification_uri":"https://x/device","expires_in":60,"interval":301}`, false},
	{`{"device_code":"d","user_code":"U","verification_uri":"https://x/device","expires_in":60,"interval":-1}`, false},
	{`{"device_code":"d","user_code":"U","verification_uri":"javascript:alert(1)","expires_in":60}`, false},
	{`{"device_code":"d","user_code":"U\u001b[2J","verification_uri":"https://x/device","expires_in":60}`, false},
	{`{"device_code":"","user_code":"U","verification_uri":"https://x/device","expires_in":60}`, false},
	{`{"device_code":"d","user_code":"U","expires_in":60}`, false},
}

func TestLoginDecodeDeviceAuth(t *testing.T) {
	for _, c := range deviceAuths {
		da, err := decodeDeviceAuth(200, []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: %+v, %v", c.body, da, err)
		}
	}
	da, err := decodeDeviceAuth(200, []byte(deviceAuths[1].body))
	if err != nil || da.interval != 5*time.Second || da.expiresIn != 24*time.Hour {
		t.Fatalf("defaults: %+v, %v", da, err)
	}
}

func FuzzDecodeDeviceAuth(f *testing.F) {
	for _, c := range deviceAuths {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		da, err := decodeDeviceAuth(200, body)
		if err != nil {
			return
		}
		if da.DeviceCode == "" || da.UserCode == "" || !printable(da.UserCode) || !printable(da.VerificationURI) ||
			da.expiresIn <= 0 || da.expiresIn > MaxDeviceCodeLifetime || da.interval <= 0 || da.interval > MaxInterval {
			t.Fatalf("accepted %q as %+v", body, da)
		}
	})
}
