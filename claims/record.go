package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// Bucket names the space's claims KV bucket, cotal_claims_<space> (a Go extension: see
// docs/interop.md).
func Bucket(space string) string { return "cotal_claims_" + space }

// MaxTTL is the longest a claim lives without being claimed again; it is also the
// bucket's max age, so no record outlives it whatever its writer asked for.
const MaxTTL = 24 * time.Hour

// MinTTL is the shortest claim the broker can expire on its own (per-message TTLs count
// whole seconds).
const MinTTL = time.Second

// Bounds of a claim's free text.
const (
	MaxReasonLength = 256 // reason, in bytes
	MaxPaths        = 32  // paths one call claims or releases
)

// Record is one claim as the bucket stores it, under Key(holder, path). Times are epoch
// milliseconds.
type Record struct {
	Holder    string `json:"holder"`         // the holder's principal, dot form; equals the key's first two tokens
	Name      string `json:"name,omitempty"` // the holder's display name when it claimed
	Path      string `json:"path"`           // normalised (Normalize); its digest is the key's last token
	Exclusive bool   `json:"exclusive"`
	Reason    string `json:"reason,omitempty"`
	Since     int64  `json:"since"`     // first claimed; kept when the holder claims it again
	Renewed   int64  `json:"renewedAt"` // this write
	Expires   int64  `json:"expiresAt"` // renewedAt + ttl
}

// Key is the bucket key of holder's claim of path: <owner>.<actor>.<digest>, where digest
// is the first 32 hex digits of the SHA-256 of the normalised path. The holder's
// credential may write only keys under its own <owner>.<actor>. (the broker refuses the
// rest), so a key's first two tokens say who wrote it.
func Key(holder protocol.Principal, path string) string {
	return holder.String() + "." + digest(path)
}

func digest(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:16])
}

// Claim is a live claim as readers see it.
type Claim struct {
	Record
	Seq    uint64    // the record's stream sequence: the earlier of two racing claims wins
	Stored time.Time // when the broker stored it
}

// ExpiresAt is when the claim lapses: its expiresAt, but never later than MaxTTL after
// the broker stored it (a raw writer cannot make a claim outlive the bound).
func (c Claim) ExpiresAt() time.Time {
	exp := time.UnixMilli(c.Expires)
	if limit := c.Stored.Add(MaxTTL); !c.Stored.IsZero() && exp.After(limit) {
		return limit
	}
	return exp
}

// decode parses the record stored under key and checks it is the key's: its holder is the
// key's principal and its path digests to the key's last token.
func decode(key string, data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, fmt.Errorf("claim %q: %w", key, err)
	}
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return Record{}, fmt.Errorf("claim %q: key is not <owner>.<actor>.<digest>", key)
	}
	owner, dig := key[:i], key[i+1:]
	p, err := protocol.ParsePrincipal(owner)
	if err != nil {
		return Record{}, fmt.Errorf("claim %q: %w", key, err)
	}
	if r.Holder != p.String() {
		return Record{}, fmt.Errorf("claim %q: holder %q differs from its key", key, r.Holder)
	}
	if n, err := Normalize(r.Path, ""); err != nil || n != r.Path || digest(r.Path) != dig {
		return Record{}, fmt.Errorf("claim %q: path %q does not match its key", key, r.Path)
	}
	if len(r.Reason) > MaxReasonLength {
		r.Reason = strings.ToValidUTF8(r.Reason[:MaxReasonLength], "")
	}
	if r.Expires <= 0 || r.Since <= 0 {
		return Record{}, fmt.Errorf("claim %q: no since or expiresAt", key)
	}
	return r, nil
}
