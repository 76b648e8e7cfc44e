package trust

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// accountFile is account.<spacekey>.json: one space's data account.
type accountFile struct {
	Version     int    `json:"version"`
	Space       string `json:"space"`
	Seed        string `json:"seed"`        // account identity key
	SigningSeed string `json:"signingSeed"` // mints every user of the space
	JWT         string `json:"jwt"`
}

// Account is the data account of one space. Every user credential of the space is
// signed by its signing key.
type Account struct {
	space     string
	pub       string
	signer    nkeys.KeyPair
	jwt       string
	limits    Limits // the JWT's (limits.go)
	limitsSet bool   // whether cotal chose them: false for an account made before limits
}

// Space is the space this account holds.
func (a *Account) Space() string { return a.space }

// PublicKey is the account's identity key.
func (a *Account) PublicKey() string { return a.pub }

// JWT is the account JWT, signed by the operator's signing key.
func (a *Account) JWT() string { return a.jwt }

// SigningKey is the public half of the key that signs the account's users.
func (a *Account) SigningKey() string { return mustPub(a.signer) }

// newAccountFile generates a data account for space with a signing key and JetStream.
func (c *Chain) newAccountFile(space string) (accountFile, error) {
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return accountFile{}, fmt.Errorf("account key: %w", err)
	}
	signer, err := nkeys.CreateAccount()
	if err != nil {
		return accountFile{}, fmt.Errorf("account signing key: %w", err)
	}
	ac := jwt.NewAccountClaims(mustPub(acc))
	ac.Name = space
	ac.SigningKeys.Add(mustPub(signer))
	DefaultLimits().applyAccount(ac) // JetStream on, within the space's limits
	token, err := ac.Encode(c.signer)
	if err != nil {
		return accountFile{}, fmt.Errorf("account jwt: %w", err)
	}
	return accountFile{Version: fileVersion, Space: space, Seed: mustSeed(acc), SigningSeed: mustSeed(signer), JWT: token}, nil
}

// loadAccount checks that an account file belongs to its space and to this operator.
func (c *Chain) loadAccount(space, path string, af accountFile, repair string) (*Account, error) {
	bad := func(format string, args ...any) error { return corrupt(path, fmt.Sprintf(format, args...), repair) }
	if af.Version != fileVersion {
		return nil, bad("version %d, want %d", af.Version, fileVersion)
	}
	if af.Space != space {
		return nil, bad("it holds space %q, not %q", af.Space, space)
	}
	acc, err := keyFromSeed(af.Seed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("account seed: %v", err)
	}
	signer, err := keyFromSeed(af.SigningSeed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("signing seed: %v", err)
	}
	ac, err := jwt.DecodeAccountClaims(af.JWT)
	if err != nil {
		return nil, bad("account jwt: %v", err)
	}
	pub := mustPub(acc)
	switch {
	case ac.Subject != pub || !ac.SigningKeys.Contains(mustPub(signer)) || ac.Name != space:
		return nil, bad("the account jwt does not match the account and signing keys beside it")
	case ac.Issuer != mustPub(c.signer):
		return nil, bad("the account jwt was signed by %s, not by this broker's operator (broker.json)", ac.Issuer)
	}
	lim, set := accountLimits(ac)
	return &Account{space: space, pub: pub, signer: signer, jwt: af.JWT, limits: lim, limitsSet: set}, nil
}

// Mint issues a user credential for spec in the standard NATS creds file format: a user
// JWT signed by the account's signing key, with spec's profile turned into permissions
// (see Permissions), tagged owner:<o>, actor:<a>, principal:<o>.<a> and profile:<p>, and
// the user's seed. Connect with it as nats.UserCredentials(file) together with
// nats.CustomInboxPrefix(InboxPrefix(creds)), since a non-provisioner credential may only
// read replies under its own inbox prefix.
func (a *Account) Mint(spec UserSpec) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("mint %q: user key: %w", spec.Name, err)
	}
	perms, err := a.Permissions(spec, mustPub(user))
	if err != nil {
		return nil, fmt.Errorf("mint %q: %w", spec.Name, err)
	}
	creds, err := mintUserKey(user, a.signer, a.pub, spec.Name, spec.tags(), perms, spec.ExpiresIn, func(uc *jwt.UserClaims) {
		uc.Limits.NatsLimits = a.UserLimits()
	})
	if err != nil {
		return nil, fmt.Errorf("mint %q: %w", spec.Name, err)
	}
	return creds, nil
}

// InboxPrefix is the reply-inbox prefix the holder of creds must connect with,
// "_INBOX_<user public key>" (nats.CustomInboxPrefix): it is the only inbox the broker
// lets an agent, observer or admin credential subscribe to, so nobody reads another
// connection's replies (which carry DMs pulled from a durable).
func InboxPrefix(creds []byte) (string, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "", fmt.Errorf("inbox prefix: creds: %w", err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", fmt.Errorf("inbox prefix: creds: %w", err)
	}
	return inboxPrefix(uc.Subject), nil
}

// mintUser mints a user with a fresh key, signed by signer, a signing key of
// issuerAccount.
func mintUser(signer nkeys.KeyPair, issuerAccount, name string, tags jwt.TagList, perms jwt.Permissions, expiresIn time.Duration) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("user key: %w", err)
	}
	return mintUserKey(user, signer, issuerAccount, name, tags, perms, expiresIn)
}

// mintUserKey signs a user JWT for user and formats it with the user's seed as a creds
// file; each of with amends the claims before they are signed.
func mintUserKey(user, signer nkeys.KeyPair, issuerAccount, name string, tags jwt.TagList, perms jwt.Permissions, expiresIn time.Duration, with ...func(*jwt.UserClaims)) ([]byte, error) {
	uc := jwt.NewUserClaims(mustPub(user))
	uc.Name = name
	uc.IssuerAccount = issuerAccount
	uc.Permissions = perms
	// Set directly, not with TagList.Add, which lower-cases: actor tokens are case-sensitive.
	uc.Tags = tags
	if expiresIn > 0 {
		uc.Expires = time.Now().Add(expiresIn).Unix()
	}
	for _, f := range with {
		f(uc)
	}
	token, err := uc.Encode(signer)
	if err != nil {
		return nil, fmt.Errorf("user jwt: %w", err)
	}
	creds, err := jwt.FormatUserConfig(token, []byte(mustSeed(user)))
	if err != nil {
		return nil, fmt.Errorf("creds file: %w", err)
	}
	return creds, nil
}

// PrincipalInboxPrefix is the reply-inbox prefix of a connection of principal (owner,
// actor) that an auth callout admitted: "_INBOX_<owner>_<actor>". The profiles pin inboxes
// to the user's public key, but a callout user's key is generated by the server for each
// connection and unknown to the client; the principal is known from the bearer, so the
// callout grants this prefix instead. Owners of user-auth spaces are "u_" and 26 base32
// characters, so the prefix names exactly one principal; connections of the same principal
// share it, and nobody else can read it.
func PrincipalInboxPrefix(owner, actor string) string { return "_INBOX_" + owner + "_" + actor }
