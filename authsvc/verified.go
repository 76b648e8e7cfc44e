package authsvc

import (
	"crypto/sha256"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cotal-ai/cotal/bearer"
)

// maxVerifiedBearers bounds how many verified bearers a lane's authorizer remembers; the
// least recently used one is dropped first.
const maxVerifiedBearers = 4096

// verifiedBearers remembers the claims of bearers that passed bearer.Issuer.Verify, keyed
// by the SHA-256 of the token, so a bearer that connects again (a reconnect, a second
// connection of the same agent) skips its signature check and JSON decoding. A remembered
// bearer is served only strictly before its expiry by the issuer's clock; from then on it
// is verified again, and refused as verify refuses it. Only the verification is
// remembered: the ledger, owner and fence checks of every connect still run.
type verifiedBearers struct {
	issuer *bearer.Issuer
	cache  *lru.Cache[[sha256.Size]byte, bearer.Claims]
}

// newVerifiedBearers returns an empty cache in front of issuer.
func newVerifiedBearers(issuer *bearer.Issuer) (*verifiedBearers, error) {
	cache, err := lru.New[[sha256.Size]byte, bearer.Claims](maxVerifiedBearers)
	if err != nil {
		return nil, fmt.Errorf("verified bearer cache: %w", err)
	}
	return &verifiedBearers{issuer: issuer, cache: cache}, nil
}

// now is the issuer's clock.
func (v *verifiedBearers) now() time.Time {
	if v.issuer.Now != nil {
		return v.issuer.Now()
	}
	return time.Now()
}

// verify returns token's claims from the cache while they are unexpired, else verifies
// token with the issuer and remembers it if it passed.
func (v *verifiedBearers) verify(token string) (bearer.Claims, error) {
	key := sha256.Sum256([]byte(token))
	if c, ok := v.cache.Get(key); ok {
		if v.now().Before(c.Expiry) {
			return c, nil
		}
		v.cache.Remove(key)
	}
	c, err := v.issuer.Verify(token)
	if err != nil {
		return bearer.Claims{}, err
	}
	if v.now().Before(c.Expiry) {
		v.cache.Add(key, c)
	}
	return c, nil
}

// len is how many bearers are remembered.
func (v *verifiedBearers) len() int { return v.cache.Len() }
