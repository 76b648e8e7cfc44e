package trust

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// File names inside the trust folder.
const (
	brokerFileName    = "broker.json"
	accountFilePrefix = "account."
	accountFileSuffix = ".json"
)

// SystemAccountName is the name the system account carries in its JWT.
const SystemAccountName = "SYS"

// operatorName is the name the operator carries in its JWT.
const operatorName = "cotal"

// brokerFile is broker.json: the operator and the system account, once per broker.
type brokerFile struct {
	Version  int          `json:"version"`
	Operator operatorKeys `json:"operator"`
	System   systemKeys   `json:"system"`
}

type operatorKeys struct {
	Seed        string `json:"seed"`        // identity key; signs the operator JWT only
	SigningSeed string `json:"signingSeed"` // signs every account JWT
	JWT         string `json:"jwt"`
}

type systemKeys struct {
	Seed        string `json:"seed"`        // account identity key
	SigningSeed string `json:"signingSeed"` // signs system users (SystemCreds)
	JWT         string `json:"jwt"`
}

// Chain is the trust chain of one broker: the operator, the system account and the data
// accounts of its spaces, kept in one folder. Its methods are safe for concurrent use.
type Chain struct {
	dir    string
	opPub  string
	opJWT  string
	signer nkeys.KeyPair // operator signing key
	sysPub string
	sysKey nkeys.KeyPair // system account signing key
	sysJWT string

	mu       sync.Mutex
	accounts map[string]*Account // loaded data accounts by space
}

// Open loads the trust chain kept in dir, creating dir (0700) and, on first use, the
// operator and system account (broker.json, 0600). It never replaces an existing file: a
// broker.json that does not decode, or whose keys and JWTs disagree, is refused with an
// error wrapping ErrCorrupt that names the file and the repair, and so is a missing
// broker.json next to existing space accounts (a new operator would orphan them).
func Open(dir string) (*Chain, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("open trust chain %s: %w", dir, err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return nil, fmt.Errorf("open trust chain %s: %w", dir, err)
	}
	path := filepath.Join(dir, brokerFileName)
	const repair = "restore it from a backup: its operator signs every space account, so a new one would invalidate every credential minted so far"
	var bf brokerFile
	err := readFile(path, &bf, repair)
	if errors.Is(err, fs.ErrNotExist) {
		err = createBroker(dir, path, &bf, repair)
	}
	if err != nil {
		return nil, fmt.Errorf("open trust chain: %w", err)
	}
	c, err := loadBroker(dir, path, bf, repair)
	if err != nil {
		return nil, fmt.Errorf("open trust chain: %w", err)
	}
	return c, nil
}

// createBroker makes broker.json, or loads the one a concurrent Open made first. It
// refuses when space accounts already exist.
func createBroker(dir, path string, bf *brokerFile, repair string) error {
	spaces, err := scanSpaces(dir)
	if err != nil {
		return err
	}
	if len(spaces) > 0 {
		return corrupt(path, fmt.Sprintf("it is missing, but the accounts it signed exist (%s)", strings.Join(spaces, ", ")),
			"restore it from a backup, or move every account.*.json aside too to start a new trust chain (every credential minted so far stops working)")
	}
	fresh, err := newBrokerFile()
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	switch err := createFile(path, fresh); {
	case errors.Is(err, errExists):
		return readFile(path, bf, repair)
	case err != nil:
		return err
	}
	*bf = fresh
	return nil
}

// newBrokerFile generates an operator and a system account, each with a signing key.
func newBrokerFile() (brokerFile, error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return brokerFile{}, fmt.Errorf("operator key: %w", err)
	}
	signer, err := nkeys.CreateOperator()
	if err != nil {
		return brokerFile{}, fmt.Errorf("operator signing key: %w", err)
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		return brokerFile{}, fmt.Errorf("system account key: %w", err)
	}
	sysSigner, err := nkeys.CreateAccount()
	if err != nil {
		return brokerFile{}, fmt.Errorf("system account signing key: %w", err)
	}
	opPub, signerPub, sysPub := mustPub(op), mustPub(signer), mustPub(sys)

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = operatorName
	oc.SigningKeys.Add(signerPub)
	oc.SystemAccount = sysPub
	oc.StrictSigningKeyUsage = true // accounts and users are signed by signing keys only
	opJWT, err := oc.Encode(op)
	if err != nil {
		return brokerFile{}, fmt.Errorf("operator jwt: %w", err)
	}
	sc := jwt.NewAccountClaims(sysPub) // no JetStream: the limits stay zero
	sc.Name = SystemAccountName
	sc.SigningKeys.Add(mustPub(sysSigner))
	sysJWT, err := sc.Encode(signer)
	if err != nil {
		return brokerFile{}, fmt.Errorf("system account jwt: %w", err)
	}
	return brokerFile{
		Version:  fileVersion,
		Operator: operatorKeys{Seed: mustSeed(op), SigningSeed: mustSeed(signer), JWT: opJWT},
		System:   systemKeys{Seed: mustSeed(sys), SigningSeed: mustSeed(sysSigner), JWT: sysJWT},
	}, nil
}

// loadBroker checks that the keys and JWTs of broker.json belong together.
func loadBroker(dir, path string, bf brokerFile, repair string) (*Chain, error) {
	bad := func(format string, args ...any) error { return corrupt(path, fmt.Sprintf(format, args...), repair) }
	if bf.Version != fileVersion {
		return nil, bad("version %d, want %d", bf.Version, fileVersion)
	}
	op, err := keyFromSeed(bf.Operator.Seed, nkeys.PrefixByteOperator)
	if err != nil {
		return nil, bad("operator seed: %v", err)
	}
	signer, err := keyFromSeed(bf.Operator.SigningSeed, nkeys.PrefixByteOperator)
	if err != nil {
		return nil, bad("operator signing seed: %v", err)
	}
	sys, err := keyFromSeed(bf.System.Seed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("system account seed: %v", err)
	}
	sysSigner, err := keyFromSeed(bf.System.SigningSeed, nkeys.PrefixByteAccount)
	if err != nil {
		return nil, bad("system account signing seed: %v", err)
	}
	opPub, signerPub, sysPub := mustPub(op), mustPub(signer), mustPub(sys)
	oc, err := jwt.DecodeOperatorClaims(bf.Operator.JWT)
	if err != nil {
		return nil, bad("operator jwt: %v", err)
	}
	if oc.Subject != opPub || oc.Issuer != opPub || !oc.SigningKeys.Contains(signerPub) || oc.SystemAccount != sysPub {
		return nil, bad("the operator jwt does not match the operator, signing and system keys beside it")
	}
	sc, err := jwt.DecodeAccountClaims(bf.System.JWT)
	if err != nil {
		return nil, bad("system account jwt: %v", err)
	}
	if sc.Subject != sysPub || !sc.SigningKeys.Contains(mustPub(sysSigner)) || sc.Issuer != signerPub {
		return nil, bad("the system account jwt does not match the system keys beside it or was not signed by this operator")
	}
	return &Chain{
		dir: dir, opPub: opPub, opJWT: bf.Operator.JWT, signer: signer,
		sysPub: sysPub, sysKey: sysSigner, sysJWT: bf.System.JWT,
		accounts: map[string]*Account{},
	}, nil
}

// Dir is the folder the chain is kept in.
func (c *Chain) Dir() string { return c.dir }

// OperatorJWT is the operator's self-signed JWT: the broker's trusted operator.
func (c *Chain) OperatorJWT() string { return c.opJWT }

// OperatorPublicKey is the operator's identity key.
func (c *Chain) OperatorPublicKey() string { return c.opPub }

// SystemAccount is the public key of the system account SYS.
func (c *Chain) SystemAccount() string { return c.sysPub }

// Space returns the data account of space, loading it or, on first use, creating it
// (account.<spacekey>.json, 0600) with a signing key and JetStream enabled. The space must
// be a canonical token (protocol.CheckSpace). An account file that does not decode or does
// not belong to this operator is refused with an error wrapping ErrCorrupt.
func (c *Chain) Space(space string) (*Account, error) {
	return c.account(space, true)
}

// Spaces lists the spaces that have an account on disk, sorted. Files in the folder whose
// name does not carry a space key (account.<lowercase hex of the space>.json) are ignored.
func (c *Chain) Spaces() ([]string, error) {
	spaces, err := scanSpaces(c.dir)
	if err != nil {
		return nil, fmt.Errorf("list spaces: %w", err)
	}
	return spaces, nil
}

// AccountJWTs maps the public key of every account, SYS, each space on disk and each
// space's callout account AUTH_<space> (see UserAuth), to its JWT: what a broker preloads
// into its memory resolver. It loads, and never creates.
func (c *Chain) AccountJWTs() (map[string]string, error) {
	spaces, err := c.Spaces()
	if err != nil {
		return nil, err
	}
	out := map[string]string{c.SystemAccount(): c.sysJWT}
	for _, s := range spaces {
		a, err := c.account(s, false)
		if err != nil {
			return nil, err
		}
		out[a.PublicKey()] = a.JWT()
	}
	if err := c.userAuthJWTs(spaces, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SystemCreds mints a user of the system account (for CONNZ, KICK and other $SYS
// requests), in the standard NATS creds file format. expiresIn 0 means it never expires.
func (c *Chain) SystemCreds(expiresIn time.Duration) ([]byte, error) {
	if expiresIn < 0 {
		return nil, fmt.Errorf("system creds: expiry %s: want a positive duration, or 0 for none", expiresIn)
	}
	creds, err := mintUser(c.sysKey, c.sysPub, "cotal-system", nil, jwt.Permissions{}, expiresIn)
	if err != nil {
		return nil, fmt.Errorf("system creds: %w", err)
	}
	return creds, nil
}

// WatchCreds mints a never-expiring user of the system account that may do only what a
// space's delivery daemon asks of it: follow the space account's CONNECT and DISCONNECT
// events and the servers' SHUTDOWN events (the presence liveness watcher), and ask the
// servers for CONNZ (the watcher's sweep and the liveness oracle) and ROUTEZ (the
// watcher's check for a cluster node that crashed). It never expires because the broker closes a
// connection whose JWT expires, which would end the watch unseen.
func (c *Chain) WatchCreds(space string) ([]byte, error) {
	acct, err := c.Space(space)
	if err != nil {
		return nil, fmt.Errorf("watch creds: %w", err)
	}
	pub := acct.PublicKey()
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("watch creds: user key: %w", err)
	}
	perms := jwt.Permissions{
		Pub: jwt.Permission{Allow: jwt.StringList{"$SYS.REQ.SERVER.*.CONNZ", "$SYS.REQ.SERVER.*.ROUTEZ"}},
		Sub: jwt.Permission{Allow: jwt.StringList{
			"$SYS.ACCOUNT." + pub + ".CONNECT", "$SYS.ACCOUNT." + pub + ".DISCONNECT", "$SYS.SERVER.*.SHUTDOWN",
			inboxPrefix(mustPub(user)) + ".>"}},
	}
	creds, err := mintUserKey(user, c.sysKey, c.sysPub, "cotal-watch-"+space, nil, perms, 0)
	if err != nil {
		return nil, fmt.Errorf("watch creds: %w", err)
	}
	return creds, nil
}

// EvictCreds mints a never-expiring user of the system account that may only ask a server
// to close one connection ($SYS.REQ.SERVER.<id>.KICK) and read the answer: the delivery
// daemon's evictor, kept apart from WatchCreds so that the standing connection which follows
// events and lists connections cannot close any, and opened only for an eviction. The broker
// does not scope KICK to an account; the daemon kicks only connections its listing of the
// space's account named.
func (c *Chain) EvictCreds(space string) ([]byte, error) {
	if _, err := c.Space(space); err != nil {
		return nil, fmt.Errorf("evict creds: %w", err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("evict creds: user key: %w", err)
	}
	perms := jwt.Permissions{
		Pub: jwt.Permission{Allow: jwt.StringList{"$SYS.REQ.SERVER.*.KICK"}},
		Sub: jwt.Permission{Allow: jwt.StringList{inboxPrefix(mustPub(user)) + ".>"}},
	}
	creds, err := mintUserKey(user, c.sysKey, c.sysPub, "cotal-evict-"+space, nil, perms, 0)
	if err != nil {
		return nil, fmt.Errorf("evict creds: %w", err)
	}
	return creds, nil
}

func (c *Chain) accountPath(space string) string {
	return filepath.Join(c.dir, accountFilePrefix+protocol.SpaceKey(space)+accountFileSuffix)
}

// account loads the space's account, creating it when create is set and no file exists.
func (c *Chain) account(space string, create bool) (*Account, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return nil, fmt.Errorf("space account: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.accounts[space]; a != nil {
		return a, nil
	}
	path := c.accountPath(space)
	repair := fmt.Sprintf("restore it from a backup, or move it aside to give space %q a new account (every credential minted for the space stops working)", space)
	var af accountFile
	err := readFile(path, &af, repair)
	if errors.Is(err, fs.ErrNotExist) && create {
		err = c.createAccount(space, path, &af, repair)
	}
	if err != nil {
		return nil, fmt.Errorf("space %q account: %w", space, err)
	}
	a, err := c.loadAccount(space, path, af, repair)
	if err != nil {
		return nil, fmt.Errorf("space %q account: %w", space, err)
	}
	c.accounts[space] = a
	return a, nil
}

// createAccount makes the space's account file, or loads the one a concurrent call made.
func (c *Chain) createAccount(space, path string, af *accountFile, repair string) error {
	fresh, err := c.newAccountFile(space)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	switch err := createFile(path, fresh); {
	case errors.Is(err, errExists):
		return readFile(path, af, repair)
	case err != nil:
		return err
	}
	*af = fresh
	return nil
}

// scanSpaces lists the spaces with an account file in dir, sorted.
func scanSpaces(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var spaces []string
	for _, e := range entries {
		name := e.Name()
		key, ok := strings.CutPrefix(name, accountFilePrefix)
		if !ok || e.IsDir() {
			continue
		}
		if key, ok = strings.CutSuffix(key, accountFileSuffix); !ok {
			continue
		}
		b, err := hex.DecodeString(key)
		space := string(b)
		if err != nil || protocol.CheckSpace(space) != nil || protocol.SpaceKey(space) != key {
			continue // not a space key: not ours
		}
		spaces = append(spaces, space)
	}
	sort.Strings(spaces)
	return spaces, nil
}

// keyFromSeed parses an nkey seed and checks its type.
func keyFromSeed(seed string, want nkeys.PrefixByte) (nkeys.KeyPair, error) {
	prefix, _, err := nkeys.DecodeSeed([]byte(seed))
	if err != nil {
		return nil, err
	}
	if prefix != want {
		return nil, fmt.Errorf("a %s seed, want %s", prefix, want)
	}
	return nkeys.FromSeed([]byte(seed))
}

// mustPub is the public key of a key pair made or parsed by nkeys, which cannot fail.
func mustPub(kp nkeys.KeyPair) string {
	pub, err := kp.PublicKey()
	if err != nil {
		panic(fmt.Sprintf("trust: public key of a valid key pair: %v", err))
	}
	return pub
}

// mustSeed is the seed of a key pair made by nkeys, which cannot fail.
func mustSeed(kp nkeys.KeyPair) string {
	seed, err := kp.Seed()
	if err != nil {
		panic(fmt.Sprintf("trust: seed of a valid key pair: %v", err))
	}
	return string(seed)
}

// RouteSecret is the password the routes of a cluster of embedded brokers that share this
// chain authenticate with (broker.Cluster.Secret): derived from the operator's signing key,
// so every node holding the same chain (cotal broker export/import) knows it and nothing
// else has to be copied, and a node of another chain cannot join.
func (c *Chain) RouteSecret() string {
	m := hmac.New(sha256.New, []byte(mustSeed(c.signer)))
	m.Write([]byte("cotal cluster route v1"))
	return hex.EncodeToString(m.Sum(nil))
}
