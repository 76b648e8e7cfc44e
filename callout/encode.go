package callout

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// decodeRequest decodes and verifies an authorization request token as
// jwt.DecodeAuthorizationRequestClaims does, decoding its claims JSON once instead of
// twice (the library first decodes a token's kind and version, then the claims). A token
// whose header is not the nkey JWT header or whose claims are not a version 2
// authorization request is left to the library, which decides it.
func decodeRequest(token string) (*jwt.AuthorizationRequestClaims, error) {
	if len(token) > jwt.MaxTokenSize {
		return nil, fmt.Errorf("token size %d exceeds maximum of %d bytes: %w", len(token), jwt.MaxTokenSize, jwt.ErrTokenTooLarge)
	}
	header, rest, ok := strings.Cut(token, ".")
	payload, sig64, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || header != tokenHeader || strings.Contains(sig64, ".") {
		return jwt.DecodeAuthorizationRequestClaims(token)
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	c := &jwt.AuthorizationRequestClaims{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if c.Type != jwt.AuthorizationRequestClaim || c.Version != claimsVersion {
		return jwt.DecodeAuthorizationRequestClaims(token)
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if !nkeys.IsValidPublicServerKey(c.Issuer) {
		return nil, fmt.Errorf("issuer %q is not a server key", c.Issuer)
	}
	issuer, err := nkeys.FromPublicKey(c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if err := issuer.Verify([]byte(token[:len(header)+1+len(payload)]), sig); err != nil {
		return nil, errors.New("claim failed V2 signature verification")
	}
	return c, nil
}
