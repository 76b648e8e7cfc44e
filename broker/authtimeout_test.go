package broker_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
)

// A broker's auth timeout follows the accounts it starts with: nats-server's 2 s for a
// few, longer for thousands, whose connects take the server longer (issue 30 item 6).
func TestAuthTimeoutFollowsAccounts(t *testing.T) {
	for _, tc := range []struct {
		accounts int
		want     time.Duration
	}{
		{accounts: 1, want: 2 * time.Second},
		{accounts: 1500, want: 3 * time.Second},
	} {
		if got := startWithAccounts(t, tc.accounts); got != tc.want {
			t.Errorf("%d accounts: the server's auth timeout is %s, want %s", tc.accounts, got, tc.want)
		}
	}
	if got := broker.AuthTimeout(100_000); got != 10*time.Second {
		t.Errorf("AuthTimeout(100000) = %s, want the 10 s bound", got)
	}
}

// startWithAccounts starts an operator-mode broker holding n accounts, the system account
// among them, and returns the auth timeout its server reports (VARZ).
func startWithAccounts(t *testing.T, n int) time.Duration {
	t.Helper()
	op, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	account := func() (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		tok, err := jwt.NewAccountClaims(pub).Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		return kp, pub, tok
	}
	sysKP, sysPub, sysJWT := account()
	accounts := map[string]string{sysPub: sysJWT}
	for range n - 1 {
		_, pub, tok := account()
		accounts[pub] = tok
	}
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t),
		OperatorJWT: opJWT, SystemAccount: sysPub, Accounts: accounts}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = sysPub
	userJWT, err := uc.Encode(sysKP)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	nc, err := nats.Connect(srv.ClientURL(), nats.UserJWTAndSeed(userJWT, string(seed)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg, err := nc.Request("$SYS.REQ.SERVER.PING.VARZ", nil, 10*time.Second)
	if err != nil {
		t.Fatalf("varz: %v", err)
	}
	var varz struct {
		Data struct {
			AuthTimeout float64 `json:"auth_timeout"`
		} `json:"data"`
	}
	if err := json.Unmarshal(msg.Data, &varz); err != nil {
		t.Fatalf("varz: %v", err)
	}
	return time.Duration(varz.Data.AuthTimeout * float64(time.Second))
}
