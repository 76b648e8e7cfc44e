package delivery

import (
	"crypto/sha256"
	"sync"

	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// claimsCacheSize bounds how many verified credentials a daemon remembers: far more than
// the members of a space that present one at once.
const claimsCacheSize = 4096

// claims is what a presented user JWT says once decoded and found to be a credential of
// this space's account signed by a trusted key: everything verify takes from it. None of
// it changes while the token's bytes stay the same.
type claims struct {
	token     string             // the exact token, compared at every hit
	principal protocol.Principal // the owner and actor tags
	uid       string             // the uid tag, a valid lifecycle uid
	user      nkeys.KeyPair      // the user key, which signs each request
	allow     []string           // the channels it may read
	iat       int64              // its issued-at, at least 1
	notBefore int64              // unix seconds; 0 means none
	expires   int64              // unix seconds; 0 means none
}

// valid reports whether the claims may be used at unix second now: not before their
// nbf, not at or after their expiry.
func (c *claims) valid(now int64) bool {
	return (c.expires == 0 || now < c.expires) && (c.notBefore == 0 || now >= c.notBefore)
}

// claimsCache remembers the claims of credentials that passed every check of a request,
// keyed by the hash of the token's bytes, so a member's next requests skip the JWT's
// decode and signature check. An entry is served only while its token is valid; the
// checks that can change between requests (the clock, the requester, the request's
// signature, the ACL row) are made at every request all the same.
type claimsCache struct {
	mu   sync.Mutex
	max  int
	byID map[[sha256.Size]byte]*claims
}

func newClaimsCache(size int) *claimsCache {
	return &claimsCache{max: size, byID: make(map[[sha256.Size]byte]*claims)}
}

// get returns the claims remembered for exactly token, if they are valid at now; an
// entry no longer valid is forgotten.
func (c *claimsCache) get(token string, now int64) (*claims, bool) {
	id := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.byID[id]
	if !ok || cl.token != token {
		return nil, false
	}
	if !cl.valid(now) {
		delete(c.byID, id)
		return nil, false
	}
	return cl, true
}

// put remembers cl. When the cache is full it first forgets the entries no longer valid
// at now, then, if none was, an arbitrary one.
func (c *claimsCache) put(cl *claims, now int64) {
	id := sha256.Sum256([]byte(cl.token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[id]; !ok && len(c.byID) >= c.max {
		for k, old := range c.byID {
			if !old.valid(now) {
				delete(c.byID, k)
			}
		}
		for k := range c.byID {
			if len(c.byID) < c.max {
				break
			}
			delete(c.byID, k)
		}
	}
	c.byID[id] = cl
}

// len is how many entries the cache holds.
func (c *claimsCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}
