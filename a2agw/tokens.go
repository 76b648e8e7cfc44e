package a2agw

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// TokenFile is the gateway's bearer tokens as .cotal/a2a/tokens.json keeps them: the
// SHA-256 of each token, never the token, with its name and expiry.
type TokenFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one minted token.
type TokenEntry struct {
	Name    string    `json:"name"`
	SHA256  string    `json:"sha256"` // lowercase hex of the token's SHA-256
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"` // zero: never
}

// ReadTokens reads the token file at path; a missing file holds no token.
func ReadTokens(path string) (TokenFile, error) {
	var f TokenFile
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read a2a tokens: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("read a2a tokens %s: %w", path, err)
	}
	return f, nil
}

// MintToken makes a token named name that expires after ttl (0: never), records its hash
// in the file at path (0600, written atomically) and returns the token, which is kept
// nowhere else.
func MintToken(path, name string, ttl time.Duration, now time.Time) (string, TokenEntry, error) {
	f, err := ReadTokens(path)
	if err != nil {
		return "", TokenEntry{}, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", TokenEntry{}, fmt.Errorf("mint a2a token: %w", err)
	}
	tok := "cotal_a2a_" + base64.RawURLEncoding.EncodeToString(b)
	e := TokenEntry{Name: name, SHA256: bearerHash(tok), Created: now.UTC()}
	if ttl > 0 {
		e.Expires = now.Add(ttl).UTC()
	}
	// Expired tokens are dropped as a new one is written.
	f.Tokens = slices.DeleteFunc(f.Tokens, func(t TokenEntry) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) })
	f.Tokens = append(f.Tokens, e)
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", TokenEntry{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", TokenEntry{}, fmt.Errorf("mint a2a token: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(out, '\n'), 0o600); err != nil {
		return "", TokenEntry{}, fmt.Errorf("mint a2a token: %w", err)
	}
	return tok, e, nil
}

// Valid reports whether tok is a token of f that has not expired at now.
func (f TokenFile) Valid(tok string, now time.Time) bool {
	if tok == "" {
		return false
	}
	h := bearerHash(tok)
	ok := false
	for _, e := range f.Tokens {
		if hashEqual(e.SHA256, h) && (e.Expires.IsZero() || now.Before(e.Expires)) {
			ok = true
		}
	}
	return ok
}

// Live counts the tokens of f that have not expired at now.
func (f TokenFile) Live(now time.Time) int {
	n := 0
	for _, e := range f.Tokens {
		if e.Expires.IsZero() || now.Before(e.Expires) {
			n++
		}
	}
	return n
}

// Bearer returns a check of bearer tokens against the file at path, read at each call so
// a token minted while the gateway runs works at once.
func Bearer(path string, now func() time.Time) func(string) bool {
	return func(tok string) bool {
		f, err := ReadTokens(path)
		return err == nil && f.Valid(tok, now())
	}
}
