// Package bearer issues and verifies a space's Cotal bearers: short-lived EdDSA (Ed25519)
// JWTs with issuer "urn:cotal:auth:<space>" and the space as their one audience, naming the
// principal (owner, actor) that presents them. It also derives owners from IdP identities
// under the space's owner secret (Owner) and publishes the issuer's public keys (JWKS).
package bearer

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cotal-ai/cotal/protocol"
)

// Bearer lifetimes and the clock skew Verify tolerates.
const (
	MaxHumanLifetime = 900 * time.Second // a person's bearer, from an IdP ID token
	MaxAgentLifetime = 300 * time.Second // an agent's bearer, from its actor token
	Leeway           = 5 * time.Second   // tolerated skew on exp, nbf and iat
)

// IssuerKeyFile is the issuer key's file name inside the key folder.
const IssuerKeyFile = "issuer.json"

// Kind says who a bearer is for; it sets the longest lifetime allowed.
type Kind string

// The bearer kinds.
const (
	KindHuman Kind = "human"
	KindAgent Kind = "agent"
)

// MaxLifetime is the longest bearer lifetime of the kind, or 0 for an unknown kind.
func (k Kind) MaxLifetime() time.Duration {
	switch k {
	case KindHuman:
		return MaxHumanLifetime
	case KindAgent:
		return MaxAgentLifetime
	}
	return 0
}

// Errors Issue and Verify wrap; callers branch on them with errors.Is.
var (
	ErrLifetime = errors.New("bearer lifetime out of range")
	ErrClaims   = errors.New("invalid bearer claims")
	ErrInvalid  = errors.New("invalid bearer")
)

// Claims is what a bearer says. Issue reads Owner, Actor, Kind, Scope, LifecycleUID and
// TTL; Verify fills every field.
type Claims struct {
	Owner string   // the "sub" claim and act.owner: "u_" + 26 base32 (see Owner)
	Actor string   // act.actor: the actor the owner acts as
	Kind  Kind     // act.kind: human or agent
	Scope []string // act.scope: the ledger scopes the bearer carries
	// LifecycleUID is act.lifecycleUid: the actor's incarnation the exchange enrolled, so
	// the callout need not look it up; empty when the exchange enrolls nobody.
	LifecycleUID string
	TTL          time.Duration // Issue: lifetime; 0 means the kind's maximum. Verify: exp - iat
	IssuedAt     time.Time     // set by Issue's clock; filled by Verify
	Expiry       time.Time     // filled by Verify
}

// act is the private "act" claim.
type act struct {
	Owner string `json:"owner"`
	Actor string `json:"actor"`
	// Kind is Go's; the reference's bearers (implementations/auth/src/token.ts) carry none,
	// and Verify infers it (see inferKind).
	Kind  Kind     `json:"kind,omitempty"`
	Scope []string `json:"scope,omitempty"`
	UID   string   `json:"lifecycleUid,omitempty"`
	// CredentialID is the reference's credential row of a managed agent's bearer; read
	// only to infer the kind.
	CredentialID string `json:"credentialId,omitempty"`
}

// private holds the non-registered claims.
type private struct {
	Ver int  `json:"ver"`
	Act *act `json:"act"`
	// Scope repeats act.scope at the top level, as the reference's bearers do (its
	// validator requires the two to be equal).
	Scope []string `json:"scope,omitempty"`
}

// inferKind is the kind of a bearer whose act names none, as the reference issues them: a
// managed agent's bearer carries act.credentialId, a person's does not.
func inferKind(a *act) Kind {
	if a.CredentialID != "" {
		return KindAgent
	}
	return KindHuman
}

// claimsVersion is the "ver" claim of every bearer.
const claimsVersion = 1

// Issuer signs and verifies the bearers of one space. Build it with Load.
type Issuer struct {
	Now    func() time.Time // clock; nil means time.Now
	space  string
	iss    string
	key    ed25519.PrivateKey
	kid    string
	signer jose.Signer
}

// IssuerName is the bearer issuer of a space: "urn:cotal:auth:<space>".
func IssuerName(space string) string { return "urn:cotal:auth:" + space }

// issuerFile is the stored form of the issuer key.
type issuerFile struct {
	Ver    int    `json:"ver"`
	Issuer string `json:"issuer"`
	Kid    string `json:"kid"`
	Seed   string `json:"seed"` // base64url Ed25519 seed
}

// Load reads the space's issuer key from dir, creating it when missing (file 0600, folder
// 0700, create-only: an existing file is never replaced; one that cannot be used wraps
// ErrCorrupt).
func Load(dir, space string) (*Issuer, error) { return LoadFrom(FileStore{Dir: dir}, space) }

// LoadFrom is Load with the issuer key kept in store under IssuerKeyFile.
func LoadFrom(store Store, space string) (*Issuer, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return nil, fmt.Errorf("bearer issuer: %w", err)
	}
	iss := IssuerName(space)
	var f issuerFile
	var key ed25519.PrivateKey
	err := loadOrCreate(store, IssuerKeyFile, &f,
		func() (any, error) {
			_, k, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, fmt.Errorf("generate key: %w", err)
			}
			kid, err := thumbprint(k.Public().(ed25519.PublicKey))
			if err != nil {
				return nil, err
			}
			return issuerFile{Ver: fileVersion, Issuer: iss, Kid: kid, Seed: base64.RawURLEncoding.EncodeToString(k.Seed())}, nil
		},
		func() error {
			if f.Ver != fileVersion {
				return fmt.Errorf("version %d, want %d", f.Ver, fileVersion)
			}
			if f.Issuer != iss {
				return fmt.Errorf("issuer %q, want %q: the folder belongs to another space", f.Issuer, iss)
			}
			seed, err := base64.RawURLEncoding.DecodeString(f.Seed)
			if err != nil || len(seed) != ed25519.SeedSize {
				return fmt.Errorf("seed is not %d bytes of base64url", ed25519.SeedSize)
			}
			key = ed25519.NewKeyFromSeed(seed)
			kid, err := thumbprint(key.Public().(ed25519.PublicKey))
			if err != nil {
				return err
			}
			if kid != f.Kid {
				return fmt.Errorf("kid %q does not match the key (%q)", f.Kid, kid)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("bearer issuer %s: %w", space, err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: key, KeyID: f.Kid, Algorithm: string(jose.EdDSA)}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("bearer issuer %s: signer: %w", space, err)
	}
	return &Issuer{space: space, iss: iss, key: key, kid: f.Kid, signer: signer}, nil
}

// thumbprint is the RFC 7638 SHA-256 thumbprint of the public key, base64url: the kid.
func thumbprint(pub ed25519.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// Issuer is the bearer issuer name, "urn:cotal:auth:<space>".
func (i *Issuer) Issuer() string { return i.iss }

// Space is the space the bearers are for: their one audience.
func (i *Issuer) Space() string { return i.space }

// KeyID is the kid of the signing key, as in the JWKS.
func (i *Issuer) KeyID() string { return i.kid }

func (i *Issuer) now() time.Time {
	if i.Now != nil {
		return i.Now()
	}
	return time.Now()
}

// Issue signs a bearer for c.Owner acting as c.Actor. It refuses (ErrClaims) an invalid
// owner, actor, kind or scope, and (ErrLifetime) a TTL that is negative or longer than the
// kind's maximum (900 s for a human, 300 s for an agent).
func (i *Issuer) Issue(c Claims) (string, error) {
	if err := checkClaims(c); err != nil {
		return "", fmt.Errorf("issue bearer: %w", err)
	}
	max := c.Kind.MaxLifetime()
	ttl := c.TTL
	if ttl == 0 {
		ttl = max
	}
	if ttl < 0 || ttl > max {
		return "", fmt.Errorf("issue bearer: %w: %s for a %s, want at most %s", ErrLifetime, c.TTL, c.Kind, max)
	}
	now := i.now().Truncate(time.Second)
	std := jwt.Claims{
		Issuer:    i.iss,
		Subject:   c.Owner,
		Audience:  jwt.Audience{i.space},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(ttl)),
	}
	priv := private{Ver: claimsVersion, Act: &act{Owner: c.Owner, Actor: c.Actor, Kind: c.Kind, Scope: c.Scope, UID: c.LifecycleUID}, Scope: c.Scope}
	tok, err := jwt.Signed(i.signer).Claims(std).Claims(priv).Serialize()
	if err != nil {
		return "", fmt.Errorf("issue bearer: sign: %w", err)
	}
	return tok, nil
}

// checkClaims validates what Issue and Verify both require of the principal.
func checkClaims(c Claims) error {
	switch {
	case !protocol.ValidOwner(c.Owner) || c.Owner == protocol.OwnerLocal:
		return fmt.Errorf("%w: owner %q is not u_ + 26 base32", ErrClaims, c.Owner)
	case !protocol.ValidActor(c.Actor):
		return fmt.Errorf("%w: actor %q", ErrClaims, c.Actor)
	case c.Kind.MaxLifetime() == 0:
		return fmt.Errorf("%w: kind %q, want %s or %s", ErrClaims, c.Kind, KindHuman, KindAgent)
	case c.LifecycleUID != "" && !protocol.ValidLifecycleUID(c.LifecycleUID):
		return fmt.Errorf("%w: lifecycle uid %q", ErrClaims, c.LifecycleUID)
	}
	for _, s := range c.Scope {
		if !validScope(s) {
			return fmt.Errorf("%w: scope %q, want [A-Za-z0-9_:-]+", ErrClaims, s)
		}
	}
	return nil
}

// validScope reports whether s matches the scope token grammar [A-Za-z0-9_:-]+.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && c != ':' && c != '-' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Verify checks a bearer and returns its claims. Every failure wraps ErrInvalid: a token that
// does not parse, is not EdDSA, embeds key headers (jwk, jku, x5u), names another kid,
// does not verify under the issuer key, has another issuer or audience, lacks iat, nbf or
// exp, is expired or not yet valid (beyond Leeway), or lives longer than its kind allows.
func (i *Issuer) Verify(token string) (Claims, error) {
	c, err := i.verify(token)
	if err != nil {
		return Claims{}, fmt.Errorf("verify bearer: %w: %w", ErrInvalid, err)
	}
	return c, nil
}

func (i *Issuer) verify(token string) (Claims, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Claims{}, fmt.Errorf("parse: %w", err)
	}
	if len(tok.Headers) != 1 {
		return Claims{}, fmt.Errorf("%d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	if h.JSONWebKey != nil { // the key is the issuer's, never one the token brings
		return Claims{}, errors.New("embedded jwk header")
	}
	for _, k := range []jose.HeaderKey{"jku", "x5u"} {
		if _, ok := h.ExtraHeaders[k]; ok {
			return Claims{}, fmt.Errorf("key header %q", k)
		}
	}
	if h.KeyID != i.kid {
		return Claims{}, fmt.Errorf("kid %q is not the issuer's", h.KeyID)
	}
	var std jwt.Claims
	var priv private
	if err := tok.Claims(i.key.Public(), &std, &priv); err != nil {
		return Claims{}, fmt.Errorf("signature: %w", err)
	}
	if std.IssuedAt == nil || std.NotBefore == nil || std.Expiry == nil {
		return Claims{}, errors.New("missing iat, nbf or exp")
	}
	if len(std.Audience) != 1 {
		return Claims{}, fmt.Errorf("%d audiences, want exactly one", len(std.Audience))
	}
	now := i.now()
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: i.iss, AnyAudience: jwt.Audience{i.space}, Time: now}, Leeway); err != nil {
		return Claims{}, err
	}
	if priv.Ver != claimsVersion || priv.Act == nil {
		return Claims{}, fmt.Errorf("ver %d or act missing", priv.Ver)
	}
	kind, maxLife := priv.Act.Kind, priv.Act.Kind.MaxLifetime()
	if kind == "" { // a reference bearer: every bearer's cap is 900 s there
		kind, maxLife = inferKind(priv.Act), MaxHumanLifetime
	}
	c := Claims{
		Owner:        std.Subject,
		Actor:        priv.Act.Actor,
		Kind:         kind,
		Scope:        priv.Act.Scope,
		LifecycleUID: priv.Act.UID,
		IssuedAt:     std.IssuedAt.Time(),
		Expiry:       std.Expiry.Time(),
	}
	c.TTL = c.Expiry.Sub(c.IssuedAt)
	if priv.Act.Owner != std.Subject {
		return Claims{}, fmt.Errorf("act.owner %q differs from sub %q", priv.Act.Owner, std.Subject)
	}
	if err := checkClaims(c); err != nil {
		return Claims{}, err
	}
	if c.TTL <= 0 || c.TTL > maxLife {
		return Claims{}, fmt.Errorf("lifetime %s for a %s, want at most %s", c.TTL, c.Kind, maxLife)
	}
	if c.IssuedAt.After(now.Add(Leeway)) {
		return Claims{}, errors.New("issued in the future")
	}
	return c, nil
}

// JWKS is the issuer's public JWK set as JSON: one Ed25519 key with its kid, alg EdDSA and
// use sig, for verifiers that hold no secret.
func (i *Issuer) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key:       i.key.Public(),
		KeyID:     i.kid,
		Algorithm: string(jose.EdDSA),
		Use:       "sig",
	}}}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("bearer issuer %s: jwks: %w", i.space, err)
	}
	return b, nil
}
