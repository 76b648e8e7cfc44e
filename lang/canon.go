package lang

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sort"

	"github.com/cotal-ai/cotal/internal/jcs"
)

// Canonical returns the RFC 8785 (JCS) serialization of a canonical value:
// nil (null), bool, a finite number (float64 or any Go integer), string,
// []any and map[string]any of these. Anything else has no canonical form and
// is an error naming the path inside the value.
func Canonical(v any) ([]byte, error) { return jcs.Canonical(v) }

// sortUTF16 orders keys by their UTF-16 code units, as RFC 8785 §3.2.3 asks.
func sortUTF16(keys []string) {
	sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
}

// lessUTF16 orders two strings by their UTF-16 code units.
func lessUTF16(a, b string) bool { return jcs.Less(a, b) }

// NumberString formats a finite number as ECMAScript's Number::toString does,
// which is the number form RFC 8785 prescribes.
func NumberString(f float64) (string, error) { return jcs.Number(f) }

// Digest is "sha256:" + hex(SHA-256(canonical(v))) (LANG §10.3).
func Digest(v any) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ProgramHash is the digest of { source } (LANG §2.1).
func ProgramHash(source string) string {
	d, _ := Digest(map[string]any{"source": source}) // a string always canonicalizes
	return d
}

// RequestID is base64url(SHA-256(canonical([runId, stepKey, inputHash,
// attempt]))), 43 characters (LANG §10.4).
func RequestID(runID, stepKey, inputHash string, attempt int) string {
	c, _ := Canonical([]any{runID, stepKey, inputHash, float64(attempt)}) // strings and an int always canonicalize
	sum := sha256.Sum256(c)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
