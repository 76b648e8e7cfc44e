package bearer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// OwnerSecretSize is the size of a space's owner secret in bytes.
const OwnerSecretSize = 32

// OwnerSecretFile is the owner secret's file name inside the key folder.
const OwnerSecretFile = "owner-secret.json"

// Derivation is how a space derives owners from IdP identities. A space keeps the one it
// was created with: another would re-key every owner.
type Derivation string

// The owner derivations.
const (
	// DerivationV1 is the reference's (implementations/auth/src/derive.ts
	// deriveOwnerForIdpSubject): HMAC-SHA256(secret, "cotal-owner-v1:" +
	// JSON.stringify([issuer, subject])). Spaces whose owner-secret.json holds "secretB64"
	// use it: every space the reference made, and every space Go makes now.
	DerivationV1 Derivation = "cotal-owner-v1"
	// DerivationGo0 is Go's before the reference's was adopted: HMAC-SHA256(secret,
	// issuer + "\x00" + subject). Spaces whose owner-secret.json holds "secret" (written by
	// those releases) keep it, so their owners and ledger grants stay valid.
	DerivationGo0 Derivation = "go-v0"
)

// OwnerSecret is a space's owner secret and the derivation the space uses.
type OwnerSecret struct {
	Key        []byte     // at least OwnerSecretSize bytes
	Derivation Derivation // DerivationV1 or DerivationGo0
}

// Owner derives the owner token of the IdP identity (issuer, subject) under s with the
// space's derivation: "u_" + the first 16 bytes of the HMAC in lower-case unpadded base32,
// 26 characters. It is stable per space and carries no personal data.
func (s OwnerSecret) Owner(issuer, subject string) string {
	if s.Derivation == DerivationGo0 {
		return LegacyOwner(s.Key, issuer, subject)
	}
	return Owner(s.Key, issuer, subject)
}

// Owner derives an owner the reference's way (DerivationV1): "u_" + base32 of the first 16
// bytes of HMAC-SHA256(secret, "cotal-owner-v1:" + JSON.stringify([issuer, subject])).
func Owner(secret []byte, issuer, subject string) string {
	msg := make([]byte, 0, 32+len(issuer)+len(subject))
	msg = append(msg, "cotal-owner-v1:["...)
	msg = appendJSString(msg, issuer)
	msg = append(msg, ',')
	msg = appendJSString(msg, subject)
	msg = append(msg, ']')
	return ownerToken(secret, msg)
}

// LegacyOwner derives an owner the way Go did before the reference's derivation
// (DerivationGo0): HMAC-SHA256(secret, issuer + "\x00" + subject).
func LegacyOwner(secret []byte, issuer, subject string) string {
	msg := make([]byte, 0, 1+len(issuer)+len(subject))
	msg = append(append(append(msg, issuer...), 0), subject...)
	return ownerToken(secret, msg)
}

// ownerToken is "u_" + the first 16 bytes of HMAC-SHA256(secret, msg), lower-case
// unpadded base32.
func ownerToken(secret, msg []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return "u_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(m.Sum(nil)[:16]))
}

// appendJSString appends s as JavaScript's JSON.stringify writes a string, UTF-8 encoded:
// `"` and `\` escaped, \b \f \n \r \t short, other controls below U+0020 as \u00xx, and
// everything else raw (no HTML escaping of < > &, U+2028 and U+2029 raw, unlike
// encoding/json). Bytes that are not UTF-8 become U+FFFD, as a JS string reaching the
// encoder would have.
func appendJSString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if r < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
				continue
			}
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// ownerSecretFile is the stored form of an owner secret: the reference's
// {"ver":1,"secretB64":...}, or Go's older {"ver":1,"secret":...}.
type ownerSecretFile struct {
	Ver       int    `json:"ver"`
	SecretB64 string `json:"secretB64,omitempty"` // base64; the reference's field, DerivationV1
	Secret    []byte `json:"secret,omitempty"`    // base64 in JSON; Go's older field, DerivationGo0
}

// LoadOwnerSecret reads the owner secret from dir, creating it when it is missing (the
// reference's form, 32 random bytes, file 0600, folder 0700). An existing file is never
// replaced: one that does not decode, or holds a secret of the wrong size, is an error
// wrapping ErrCorrupt. The field the file holds the secret in decides the derivation (see
// DerivationV1 and DerivationGo0).
func LoadOwnerSecret(dir string) (OwnerSecret, error) {
	return LoadOwnerSecretFrom(FileStore{Dir: dir})
}

// LoadOwnerSecretFrom is LoadOwnerSecret with the secret kept in store under
// OwnerSecretFile.
func LoadOwnerSecretFrom(store Store) (OwnerSecret, error) {
	var f ownerSecretFile
	var out OwnerSecret
	err := loadOrCreate(store, OwnerSecretFile, &f,
		func() (any, error) {
			s := make([]byte, OwnerSecretSize)
			if _, err := rand.Read(s); err != nil {
				return nil, fmt.Errorf("random secret: %w", err)
			}
			return ownerSecretFile{Ver: fileVersion, SecretB64: base64.StdEncoding.EncodeToString(s)}, nil
		},
		func() error {
			var err error
			out, err = f.decode()
			return err
		})
	if err != nil {
		return OwnerSecret{}, fmt.Errorf("owner secret: %w", err)
	}
	return out, nil
}

// decode checks a stored owner secret and tells its derivation.
func (f ownerSecretFile) decode() (OwnerSecret, error) {
	if f.Ver != fileVersion {
		return OwnerSecret{}, fmt.Errorf("version %d, want %d", f.Ver, fileVersion)
	}
	switch {
	case f.SecretB64 != "" && len(f.Secret) > 0:
		return OwnerSecret{}, errors.New(`both "secretB64" and "secret": keep the one the space's owners derive from`)
	case f.SecretB64 != "":
		k, err := base64.StdEncoding.DecodeString(f.SecretB64)
		if err != nil {
			return OwnerSecret{}, fmt.Errorf("secretB64: %w", err)
		}
		if len(k) != OwnerSecretSize {
			return OwnerSecret{}, fmt.Errorf("secretB64 is %d bytes, want %d", len(k), OwnerSecretSize)
		}
		return OwnerSecret{Key: k, Derivation: DerivationV1}, nil
	case len(f.Secret) < OwnerSecretSize:
		return OwnerSecret{}, fmt.Errorf("secret is %d bytes, want at least %d", len(f.Secret), OwnerSecretSize)
	}
	return OwnerSecret{Key: f.Secret, Derivation: DerivationGo0}, nil
}
