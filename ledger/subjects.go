package ledger

import (
	"strings"

	"github.com/cotal-ai/cotal/bearer"
)

// SplitSubject reads a row subject. One starting with http:// or https:// and holding a
// "|" is qualified, "<issuer>|<subject>"; anything else is a bare subject of the space's IdP
// (some providers' subjects hold "|" themselves, such as "auth0|123").
func SplitSubject(s string) (issuer, subject string, qualified bool) {
	if strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") {
		if i, sub, ok := strings.Cut(s, "|"); ok {
			return i, sub, true
		}
	}
	return "", s, false
}

// HasOwner reports whether one of the row's subjects derives to owner under the owner
// secret with the space's derivation (bearer.OwnerSecret.Owner). Bare subjects derive with idpIssuer and never match when it is
// empty. The exchange checks it before renewing an agent's bearer and the callout at every
// connect, so a revoke takes effect at the next connect.
func (r Row) HasOwner(secret bearer.OwnerSecret, idpIssuer, owner string) bool {
	for _, e := range r.Subjects {
		iss, sub, q := SplitSubject(e)
		if !q {
			if idpIssuer == "" {
				continue
			}
			iss = idpIssuer
		}
		if secret.Owner(iss, sub) == owner {
			return true
		}
	}
	return false
}
