package trust

import (
	"errors"
	"os"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TestUserAuthBroker: the callout account is created once, reloads identical, is preloaded
// by AccountJWTs, and a real operator-mode broker accepts its callout user.
func TestUserAuthBroker(t *testing.T) {
	chain, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ua, err := chain.UserAuth("team")
	if err != nil {
		t.Fatal(err)
	}
	again, err := chain.UserAuth("team")
	if err != nil {
		t.Fatal(err)
	}
	if again.AccountJWT() != ua.AccountJWT() || string(again.XKeySeed()) != string(ua.XKeySeed()) {
		t.Fatal("a second UserAuth did not load the same callout account")
	}
	ac, err := jwt.DecodeAccountClaims(ua.AccountJWT())
	if err != nil {
		t.Fatal(err)
	}
	xkey, err := nkeys.FromSeed(ua.XKeySeed())
	if err != nil {
		t.Fatal(err)
	}
	xpub, _ := xkey.PublicKey()
	data := ua.DataAccount()
	if ac.Name != "AUTH_team" || ac.Authorization.XKey != xpub || !ac.Authorization.AllowedAccounts.Contains(data.PublicKey()) || len(ac.Authorization.AuthUsers) != 1 {
		t.Fatalf("account claims: %+v", ac.Authorization)
	}
	if ac.Limits.JetStreamLimits != (jwt.JetStreamLimits{}) {
		t.Fatal("the callout account has JetStream")
	}
	if mustPub(data.UserSigner()) != data.SigningKey() {
		t.Fatal("UserSigner is not the data account's signing key")
	}
	jwts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	if jwts[ua.PublicKey()] != ua.AccountJWT() || jwts[data.PublicKey()] != data.JWT() {
		t.Fatal("AccountJWTs misses the callout or data account")
	}
	sc, err := ReadCreds(ua.SentinelCreds())
	if err != nil {
		t.Fatal(err)
	}
	suc, err := jwt.DecodeUserClaims(sc.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if !suc.Pub.Deny.Contains(">") || !suc.Sub.Deny.Contains(">") || suc.IssuerAccount != ua.PublicKey() {
		t.Fatalf("sentinel is not deny-all in the callout account: %+v", suc.Permissions)
	}

	url := startBroker(t, chain)
	path := t.TempDir() + "/callout.creds"
	if err := os.WriteFile(path, ua.CalloutCreds(), 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserCredentials(path), nats.Timeout(deadline), nats.NoReconnect())
	if err != nil {
		t.Fatalf("callout user refused: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestUserAuthCorrupt: a callout account file that does not match its data account is
// refused, never replaced.
func TestUserAuthCorrupt(t *testing.T) {
	chain, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.UserAuth("team"); err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Space("other"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(chain.userAuthPath("team"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chain.userAuthPath("other"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := chain.UserAuth("other"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a foreign callout account file: %v, want ErrCorrupt", err)
	}
	if _, err := chain.AccountJWTs(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AccountJWTs over a corrupt file: %v, want ErrCorrupt", err)
	}
}
