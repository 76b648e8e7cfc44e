// Package trusttest makes credentials for tests of packages that only carry them.
package trusttest

import (
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// SentinelCreds returns a deny-all user creds file (publish and subscribe deny ">"),
// signed by a fresh account key: the shape of a user-auth space's sentinel creds.
func SentinelCreds(t testing.TB) string {
	t.Helper()
	acct, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = "sentinel"
	uc.Pub.Deny.Add(">")
	uc.Sub.Deny.Add(">")
	tok, err := uc.Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	return string(creds)
}
