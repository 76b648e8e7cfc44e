package oidctest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/oidc"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

// post sends a form to the issuer and decodes the JSON answer.
func post(t *testing.T, u string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, m
}

func TestIDTokenVerifies(t *testing.T) {
	iss := oidctest.Start(t, nil)
	tok, err := iss.IDToken("alice")
	if err != nil {
		t.Fatal(err)
	}
	v := &oidc.Verifier{Issuer: iss.URL, ClientID: "cotal"}
	if gotIss, sub, err := v.VerifyIDToken(t.Context(), tok); err != nil || gotIss != iss.URL || sub != "alice" {
		t.Fatalf("verify: (%q, %q, %v)", gotIss, sub, err)
	}
}

// TestDeviceFlow walks the device grant by hand: pending, slow_down, approved, refreshed,
// and the refresh token rotated.
func TestDeviceFlow(t *testing.T) {
	clk := oidctest.NewClock(testclock.Epoch(t))
	iss := oidctest.Start(t, &oidctest.Issuer{ClientID: "c1", Interval: 2 * time.Second, Now: clk.Now})
	if st, m := post(t, iss.URL+oidctest.PathDevice, url.Values{"client_id": {"other"}}); st != http.StatusUnauthorized || m["error"] != "invalid_client" {
		t.Fatalf("wrong client: %d %v", st, m)
	}
	st, dev := post(t, iss.URL+oidctest.PathDevice, url.Values{"client_id": {"c1"}})
	if st != http.StatusOK || dev["interval"] != 2.0 || dev["expires_in"] != 600.0 || dev["user_code"] == "" {
		t.Fatalf("device authorization: %d %v", st, dev)
	}
	poll := url.Values{"client_id": {"c1"}, "grant_type": {oidctest.GrantTypeDeviceCode}, "device_code": {dev["device_code"].(string)}}
	wantErr := func(code string) {
		t.Helper()
		if st, m := post(t, iss.URL+oidctest.PathToken, poll); st != http.StatusBadRequest || m["error"] != code {
			t.Fatalf("want %s, got %d %v", code, st, m)
		}
	}
	wantErr("slow_down") // no time passed since issuance
	clk.Add(7 * time.Second)
	wantErr("authorization_pending")
	if err := iss.Approve(dev["user_code"].(string), "alice"); err != nil {
		t.Fatal(err)
	}
	clk.Add(7 * time.Second)
	st, tok := post(t, iss.URL+oidctest.PathToken, poll)
	if st != http.StatusOK || tok["id_token"] == nil || tok["refresh_token"] == nil {
		t.Fatalf("approved: %d %v", st, tok)
	}
	wantErr("invalid_grant") // a device code is used once

	refresh := url.Values{"client_id": {"c1"}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}
	if st, m := post(t, iss.URL+oidctest.PathToken, refresh); st != http.StatusOK || m["id_token"] == nil || m["refresh_token"] == tok["refresh_token"] {
		t.Fatalf("refresh: %d %v", st, m)
	}
	if st, m := post(t, iss.URL+oidctest.PathToken, refresh); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Fatalf("reused refresh token: %d %v", st, m)
	}
	if iss.Refreshes() != 1 {
		t.Fatalf("refreshes %d, want 1", iss.Refreshes())
	}
}

func TestDeviceFlowDeniedExpiredAuto(t *testing.T) {
	clk := oidctest.NewClock(testclock.Epoch(t))
	iss := oidctest.Start(t, &oidctest.Issuer{AutoApprove: "bob", DeviceCodeTTL: time.Minute, Now: clk.Now})
	start := func() url.Values {
		_, dev := post(t, iss.URL+oidctest.PathDevice, url.Values{"client_id": {"cotal"}})
		return url.Values{"client_id": {"cotal"}, "grant_type": {oidctest.GrantTypeDeviceCode}, "device_code": {dev["device_code"].(string)}}
	}
	poll := func(v url.Values) string {
		clk.Add(time.Second)
		_, m := post(t, iss.URL+oidctest.PathToken, v)
		if e, ok := m["error"].(string); ok {
			return e
		}
		return "ok"
	}
	auto := start()
	if got := []string{poll(auto), poll(auto)}; got[0] != "authorization_pending" || got[1] != "ok" {
		t.Fatalf("auto-approve: %v", got)
	}
	denied := start()
	codes := iss.PendingUserCodes()
	if len(codes) != 1 {
		t.Fatalf("pending %v", codes)
	}
	if err := iss.Deny(codes[0]); err != nil {
		t.Fatal(err)
	}
	if got := poll(denied); got != "access_denied" {
		t.Fatalf("denied: %s", got)
	}
	expired := start()
	clk.Add(time.Minute)
	if got := poll(expired); got != "expired_token" {
		t.Fatalf("expired: %s", got)
	}
	if err := iss.Approve("NOPE-NOPE", "x"); err == nil {
		t.Fatal("approved an unknown user code")
	}
}
