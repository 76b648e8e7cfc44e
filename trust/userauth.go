package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// File name parts of a space's callout account: auth.<spacekey>.json. The prefix differs
// from accountFilePrefix, so Spaces never lists it.
const (
	userAuthFilePrefix = "auth."
	userAuthFileSuffix = ".json"
)

// Names of the callout account's users, as they appear in their JWTs and in CONNZ.
const (
	CalloutUserName  = "callout"
	SentinelUserName = "sentinel"
)

// CalloutAccountName is the name of space's callout account: "AUTH_<space>".
func CalloutAccountName(space string) string { return "AUTH_" + space }

// userAuthFile is auth.<spacekey>.json: the callout account of one user-auth space.
type userAuthFile struct {
	Version      int    `json:"version"`
	Space        string `json:"space"`
	Seed         string `json:"seed"`         // AUTH_<space> identity key
	SigningSeed  string `json:"signingSeed"`  // signs the callout and sentinel users and the callout's responses
	XKeySeed     string `json:"xkeySeed"`     // curve key the server seals requests to
	CalloutSeed  string `json:"calloutSeed"`  // the callout user, the account's only auth user
	SentinelSeed string `json:"sentinelSeed"` // the deny-all user clients connect as
	JWT          string `json:"jwt"`          // account JWT, signed by the operator signing key
}

// UserAuth is the callout account AUTH_<space> of a user-auth space: connections made with
// its sentinel credential are handed to the auth callout (its callout user), which places
// them into the space's data account, the one allowed account. It has no JetStream.
type UserAuth struct {
	space    string
	pub      string
	signer   nkeys.KeyPair
	xkeySeed []byte
	jwt      string
	callout  []byte
	sentinel []byte
	data     *Account
}

// UserAuth returns the callout account of space, loading it or, on first use, creating it
// (auth.<spacekey>.json, 0600, create-only) together with the space's data account when
// that is missing. The account JWT, signed by the operator signing key, names the callout
// user as its only auth user, the data account as its only allowed account, and the
// account's xkey. A file that does not decode or does not match this operator and data
// account is refused with an error wrapping ErrCorrupt.
func (c *Chain) UserAuth(space string) (*UserAuth, error) {
	return c.userAuth(space, true)
}

func (c *Chain) userAuthPath(space string) string {
	return filepath.Join(c.dir, userAuthFilePrefix+protocol.SpaceKey(space)+userAuthFileSuffix)
}

// userAuth loads the callout account of space, creating it when create is set.
func (c *Chain) userAuth(space string, create bool) (*UserAuth, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return nil, fmt.Errorf("callout account: %w", err)
	}
	data, err := c.account(space, create)
	if err != nil {
		return nil, fmt.Errorf("callout account: %w", err)
	}
	path := c.userAuthPath(space)
	repair := fmt.Sprintf("restore it from a backup, or move it aside to give space %q a new callout account (restart the broker and the auth service, and hand out the new sentinel creds)", space)
	var f userAuthFile
	err = readFile(path, &f, repair)
	if errors.Is(err, fs.ErrNotExist) && create {
		var fresh userAuthFile
		if fresh, err = c.newUserAuthFile(space, data); err == nil {
			switch err = createFile(path, fresh); {
			case errors.Is(err, errExists):
				err = readFile(path, &f, repair)
			case err == nil:
				f = fresh
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("space %q callout account: %w", space, err)
	}
	ua, err := c.loadUserAuth(path, f, data, repair)
	if err != nil {
		return nil, fmt.Errorf("space %q callout account: %w", space, err)
	}
	return ua, nil
}

// newUserAuthFile generates the keys and account JWT of space's callout account.
func (c *Chain) newUserAuthFile(space string, data *Account) (userAuthFile, error) {
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return userAuthFile{}, fmt.Errorf("account key: %w", err)
	}
	signer, err := nkeys.CreateAccount()
	if err != nil {
		return userAuthFile{}, fmt.Errorf("account signing key: %w", err)
	}
	xkey, err := nkeys.CreateCurveKeys()
	if err != nil {
		return userAuthFile{}, fmt.Errorf("xkey: %w", err)
	}
	callout, err := nkeys.CreateUser()
	if err != nil {
		return userAuthFile{}, fmt.Errorf("callout user key: %w", err)
	}
	sentinel, err := nkeys.CreateUser()
	if err != nil {
		return userAuthFile{}, fmt.Errorf("sentinel user key: %w", err)
	}
	ac := jwt.NewAccountClaims(mustPub(acc))
	ac.Name = CalloutAccountName(space)
	ac.SigningKeys.Add(mustPub(signer))
	ac.Authorization.AuthUsers.Add(mustPub(callout))
	ac.Authorization.AllowedAccounts.Add(data.PublicKey())
	ac.Authorization.XKey = mustPub(xkey)
	token, err := ac.Encode(c.signer)
	if err != nil {
		return userAuthFile{}, fmt.Errorf("account jwt: %w", err)
	}
	return userAuthFile{
		Version: fileVersion, Space: space,
		Seed: mustSeed(acc), SigningSeed: mustSeed(signer), XKeySeed: mustSeed(xkey),
		CalloutSeed: mustSeed(callout), SentinelSeed: mustSeed(sentinel), JWT: token,
	}, nil
}

// loadUserAuth checks that the file's keys and JWT belong together, to this operator and
// to data, and mints the callout and sentinel creds from the stored user keys.
func (c *Chain) loadUserAuth(path string, f userAuthFile, data *Account, repair string) (*UserAuth, error) {
	bad := func(format string, args ...any) error { return corrupt(path, fmt.Sprintf(format, args...), repair) }
	if f.Version != fileVersion {
		return nil, bad("version %d, want %d", f.Version, fileVersion)
	}
	if f.Space != data.Space() {
		return nil, bad("it holds space %q, not %q", f.Space, data.Space())
	}
	acc, err := keyFromSeed(f.Seed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("account seed: %v", err)
	}
	signer, err := keyFromSeed(f.SigningSeed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("signing seed: %v", err)
	}
	xkey, err := keyFromSeed(f.XKeySeed, nkeys.PrefixByteCurve)
	if err != nil {
		return nil, bad("xkey seed: %v", err)
	}
	callout, err := keyFromSeed(f.CalloutSeed, nkeys.PrefixByteUser)
	if err != nil {
		return nil, bad("callout seed: %v", err)
	}
	sentinel, err := keyFromSeed(f.SentinelSeed, nkeys.PrefixByteUser)
	if err != nil {
		return nil, bad("sentinel seed: %v", err)
	}
	ac, err := jwt.DecodeAccountClaims(f.JWT)
	if err != nil {
		return nil, bad("account jwt: %v", err)
	}
	pub := mustPub(acc)
	az := ac.Authorization
	switch {
	case ac.Subject != pub || !ac.SigningKeys.Contains(mustPub(signer)) || ac.Name != CalloutAccountName(f.Space):
		return nil, bad("the account jwt does not match the account and signing keys beside it")
	case ac.Issuer != mustPub(c.signer):
		return nil, bad("the account jwt was signed by %s, not by this broker's operator (broker.json)", ac.Issuer)
	case len(az.AuthUsers) != 1 || !az.AuthUsers.Contains(mustPub(callout)):
		return nil, bad("the account jwt's auth users are not exactly the callout user beside it")
	case len(az.AllowedAccounts) != 1 || !az.AllowedAccounts.Contains(data.PublicKey()):
		return nil, bad("the account jwt's allowed accounts are not exactly the space's data account")
	case az.XKey != mustPub(xkey):
		return nil, bad("the account jwt's xkey does not match the xkey seed beside it")
	}
	calloutCreds, err := mintUserKey(callout, signer, pub, CalloutUserName, nil, jwt.Permissions{}, 0)
	if err != nil {
		return nil, fmt.Errorf("callout creds: %w", err)
	}
	deny := jwt.Permissions{}
	deny.Pub.Deny.Add(">")
	deny.Sub.Deny.Add(">")
	sentinelCreds, err := mintUserKey(sentinel, signer, pub, SentinelUserName, nil, deny, 0)
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	return &UserAuth{
		space: f.Space, pub: pub, signer: signer, xkeySeed: []byte(f.XKeySeed), jwt: f.JWT,
		callout: calloutCreds, sentinel: sentinelCreds, data: data,
	}, nil
}

// userAuthJWTs adds the JWT of every callout account on disk to out, keyed by its public
// key. It loads and never creates.
func (c *Chain) userAuthJWTs(spaces []string, out map[string]string) error {
	for _, s := range spaces {
		ua, err := c.userAuth(s, false)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not a user-auth space
		}
		if err != nil {
			return err
		}
		out[ua.PublicKey()] = ua.AccountJWT()
	}
	return nil
}

// Space is the space this callout account serves.
func (u *UserAuth) Space() string { return u.space }

// PublicKey is the callout account's identity key.
func (u *UserAuth) PublicKey() string { return u.pub }

// AccountJWT is the callout account's JWT, signed by the operator's signing key.
func (u *UserAuth) AccountJWT() string { return u.jwt }

// CalloutCreds is the creds file of the callout user, the account's only auth user: the
// auth service connects with it to answer $SYS.REQ.USER.AUTH. It never expires.
func (u *UserAuth) CalloutCreds() []byte { return append([]byte(nil), u.callout...) }

// SentinelCreds is the creds file of the deny-all sentinel user (no publish, no
// subscribe): clients connect with it plus a bearer as the connect token, and the callout
// places them into the data account. It never expires.
func (u *UserAuth) SentinelCreds() []byte { return append([]byte(nil), u.sentinel...) }

// XKeySeed is the seed of the account's curve key (prefix X), whose public half the
// account JWT names as its xkey: the callout opens requests and seals responses with it.
func (u *UserAuth) XKeySeed() []byte { return append([]byte(nil), u.xkeySeed...) }

// CalloutSigner is the callout account's signing key, which signs the authorization
// responses. Hand it to the auth service only.
func (u *UserAuth) CalloutSigner() nkeys.KeyPair { return u.signer }

// DataAccount is the space's data account, the one account the callout places users in.
func (u *UserAuth) DataAccount() *Account { return u.data }

// UserSigner is the data account's signing key, which signs every user of the space. It
// is exposed for the auth callout only, which mints each connection's user JWT with it;
// everything else mints through Mint.
func (a *Account) UserSigner() nkeys.KeyPair { return a.signer }
