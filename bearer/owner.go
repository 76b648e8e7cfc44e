package bearer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// OwnerSecretSize is the size of a space's owner secret in bytes.
const OwnerSecretSize = 32

// OwnerSecretFile is the owner secret's file name inside the key folder.
const OwnerSecretFile = "owner-secret.json"

// Owner derives the owner token of the IdP identity (issuer, subject) under a space's owner
// secret: "u_" + the first 16 bytes of HMAC-SHA256(secret, issuer + "\x00" + subject) in
// lower-case unpadded base32, 26 characters. It is stable per space and carries no personal
// data; a different secret gives unrelated owners.
func Owner(secret []byte, issuer, subject string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(issuer))
	m.Write([]byte{0})
	m.Write([]byte(subject))
	return "u_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(m.Sum(nil)[:16]))
}

// ownerSecretFile is the stored form of an owner secret.
type ownerSecretFile struct {
	Ver    int    `json:"ver"`
	Secret []byte `json:"secret"` // base64 in JSON
}

// LoadOwnerSecret reads the owner secret from dir, creating it (32 random bytes, file 0600,
// folder 0700) when it is missing. An existing file is never replaced: one that does not
// decode, or holds fewer than 32 bytes, is an error wrapping ErrCorrupt.
func LoadOwnerSecret(dir string) ([]byte, error) { return LoadOwnerSecretFrom(FileStore{Dir: dir}) }

// LoadOwnerSecretFrom is LoadOwnerSecret with the secret kept in store under
// OwnerSecretFile.
func LoadOwnerSecretFrom(store Store) ([]byte, error) {
	var f ownerSecretFile
	err := loadOrCreate(store, OwnerSecretFile, &f,
		func() (any, error) {
			s := make([]byte, OwnerSecretSize)
			if _, err := rand.Read(s); err != nil {
				return nil, fmt.Errorf("random secret: %w", err)
			}
			return ownerSecretFile{Ver: fileVersion, Secret: s}, nil
		},
		func() error {
			if f.Ver != fileVersion {
				return fmt.Errorf("version %d, want %d", f.Ver, fileVersion)
			}
			if len(f.Secret) < OwnerSecretSize {
				return fmt.Errorf("secret is %d bytes, want at least %d", len(f.Secret), OwnerSecretSize)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("owner secret: %w", err)
	}
	return f.Secret, nil
}
