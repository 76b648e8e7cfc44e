package callout

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// tokenHeader is the encoded header of every JWT the responder signs: the base64url of
// {"typ":"JWT","alg":"ed25519-nkey"}, as jwt.Encode writes it.
const tokenHeader = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ"

// claimsVersion is the jwt library's claims version, the "nats.version" it writes.
const claimsVersion = 2

// jtiEncoding encodes a claims hash into its "jti", as jwt.Encode does.
var jtiEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// encodeUser signs u with s at now. The token is byte for byte the one u.Encode(s) makes
// at that second; it skips what Encode redoes per call (the header's JSON, the signer's
// key checks, which New made once) and its string formatting.
func encodeUser(u *jwt.UserClaims, s *signer, now time.Time) (string, error) {
	if !nkeys.IsValidPublicUserKey(u.Subject) {
		return "", errors.New("expected subject to be user public key")
	}
	u.Type = jwt.UserClaim
	u.Version = claimsVersion
	return encodeClaims(u, &u.ClaimsData, s, now)
}

// encodeResponse signs the authorization response r with s at now, byte for byte as
// r.Encode(s) at that second.
func encodeResponse(r *jwt.AuthorizationResponseClaims, s *signer, now time.Time) (string, error) {
	r.Type = jwt.AuthorizationResponseClaim
	r.Version = claimsVersion
	return encodeClaims(r, &r.ClaimsData, s, now)
}

// encodeClaims fills cd (the ClaimsData of claims) with the issuer, issue time and jti
// and returns claims signed by s as a compact JWT.
func encodeClaims(claims any, cd *jwt.ClaimsData, s *signer, now time.Time) (string, error) {
	if cd.Subject == "" {
		return "", errors.New("subject is not set")
	}
	cd.Issuer = s.pub
	cd.IssuedAt = now.UTC().Unix()
	cd.ID = "" // the jti is the hash of the claims data without one
	j, err := json.Marshal(cd)
	if err != nil {
		return "", fmt.Errorf("claims data: %w", err)
	}
	sum := sha512.Sum512_256(j)
	cd.ID = jtiEncoding.EncodeToString(sum[:])
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	enc := base64.RawURLEncoding
	signed := len(tokenHeader) + 1 + enc.EncodedLen(len(payload))
	buf := make([]byte, signed, signed+1+enc.EncodedLen(ed25519.SignatureSize))
	copy(buf, tokenHeader)
	buf[len(tokenHeader)] = '.'
	enc.Encode(buf[len(tokenHeader)+1:], payload)
	sig := ed25519.Sign(s.priv, buf)
	buf = append(buf, '.')
	return string(enc.AppendEncode(buf, sig)), nil
}
