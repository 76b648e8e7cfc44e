package oidc

import (
	"strings"
	"testing"
)

// A refused --idp never repeats a password or a query's token.
func TestIdPURLSecretsNotEchoed(t *testing.T) {
	for _, raw := range []string{
		"https://user:hunter2@idp.example.com",
		"https://idp.example.com/?token=hunter2",
		"https://idp.example.com/#hunter2",
		"http://user:hunter2@example.com/realms/x",
		"ftp://user:hunter2@idp.example.com",
		"https://user:hunter2@idp.example.com/%zz",
	} {
		if err := CheckIssuer(raw); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckIssuer(%q): %v", raw, err)
		}
		if _, err := NormalizeIdPURL(raw); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("NormalizeIdPURL(%q): %v", raw, err)
		}
	}
}
