package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

func creds(t *testing.T, b []byte) nats.Option {
	t.Helper()
	path := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return nats.UserCredentials(path)
}

// TestOperatorModeServesAccountsAndTakesNewOnes starts the broker in operator mode with one
// space, refuses an anonymous client, and adds a second space at runtime over the system
// account without disturbing a client of the first.
func TestOperatorModeServesAccountsAndTakesNewOnes(t *testing.T) {
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := chain.Space("alpha")
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t),
		OperatorJWT: chain.OperatorJWT(), SystemAccount: chain.SystemAccount(), Accounts: accounts}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to an operator-mode broker")
	}
	admin, err := alpha.Mint(trust.UserSpec{Name: "op", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: "local", Actor: "op"}})
	if err != nil {
		t.Fatal(err)
	}
	disconnected := make(chan struct{}, 1)
	a, err := nats.Connect(srv.ClientURL(), creds(t, admin), nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnected <- struct{}{} }))
	if err != nil {
		t.Fatalf("alpha provisioner: %v", err)
	}
	defer a.Close()
	js, _ := jetstream.New(a)
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatalf("alpha has no JetStream: %v", err)
	}

	beta, err := chain.Space("beta")
	if err != nil {
		t.Fatal(err)
	}
	betaAdmin, _ := beta.Mint(trust.UserSpec{Name: "op", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: "local", Actor: "op"}})
	if nc, err := nats.Connect(srv.ClientURL(), creds(t, betaAdmin)); err == nil {
		nc.Close()
		t.Fatal("beta connected before its account was pushed")
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := nats.Connect(srv.ClientURL(), creds(t, sysCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := trust.PushAccount(ctx, sys, beta.JWT()); err != nil {
		t.Fatal(err)
	}
	b, err := nats.Connect(srv.ClientURL(), creds(t, betaAdmin))
	if err != nil {
		t.Fatalf("beta after push: %v", err)
	}
	defer b.Close()
	bjs, _ := jetstream.New(b)
	if _, err := bjs.AccountInfo(ctx); err != nil {
		t.Fatalf("beta has no JetStream: %v", err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-disconnected:
		t.Fatal("alpha's client was dropped when beta was added")
	default:
	}
}

// TestOperatorModeOnEveryInterface: an authenticated server may listen on every interface;
// ListenAddr names 0.0.0.0 with the bound port while ClientURL names loopback.
func TestOperatorModeOnEveryInterface(t *testing.T) {
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	srv := &broker.Server{Dir: t.TempDir(), Host: "0.0.0.0", Port: -1, Logger: brokertest.Logger(t),
		OperatorJWT: chain.OperatorJWT(), SystemAccount: chain.SystemAccount(), Accounts: accounts}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	_, p, _ := strings.Cut(srv.ClientURL(), "nats://127.0.0.1:")
	if p == "" || p == "0" || srv.ListenAddr() != "0.0.0.0:"+p {
		t.Fatalf("listen %q, client url %q", srv.ListenAddr(), srv.ClientURL())
	}
}
