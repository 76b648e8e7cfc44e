package authsvc

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// TestEvictCluster evicts a user connected to both servers of a two-server cluster through
// a system-account connection to one of them: both its connections close, and another
// user's connection of the same account stays. It does so in one CONNZ page per server, and
// in pages of one connection.
func TestEvictCluster(t *testing.T) {
	t.Run("one page", func(t *testing.T) { testEvictCluster(t, connzPage) })
	t.Run("pages of one", func(t *testing.T) { testEvictCluster(t, 1) })
}

func testEvictCluster(t *testing.T, pageSize int) {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT := evictSign(t, jwt.NewOperatorClaims(opPub), op)
	sysAcct, _ := nkeys.CreateAccount()
	sysPub, _ := sysAcct.PublicKey()
	dataAcct, _ := nkeys.CreateAccount()
	dataPub, _ := dataAcct.PublicKey()
	accounts := map[string]string{
		sysPub:  evictSign(t, jwt.NewAccountClaims(sysPub), op),
		dataPub: evictSign(t, jwt.NewAccountClaims(dataPub), op),
	}
	a := evictServer(t, opJWT, sysPub, accounts, nil)
	b := evictServer(t, opJWT, sysPub, accounts, a.ClusterAddr())

	sys := evictConnect(t, a, sysAcct, nil)
	evictWait(t, "server b answering through server a", func() bool { // b's system subscriptions reached a
		_, err := sys.Request("$SYS.REQ.SERVER."+b.ID()+".IDZ", nil, time.Second)
		return err == nil
	})

	victim, _ := nkeys.CreateUser()
	victimPub, _ := victim.PublicKey()
	bystander, _ := nkeys.CreateUser()
	gone := make(chan *nats.Conn, 3)
	onGone := nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { gone <- nc })
	// The bystander first: b lists the victim on a later page when pages hold one.
	stays := evictConnect(t, b, dataAcct, bystander, onGone)
	onA := evictConnect(t, a, dataAcct, victim, onGone)
	onB := evictConnect(t, b, dataAcct, victim, onGone)

	// A connection with a plain user JWT is reported with the user's public key.
	n, err := evict(t.Context(), sys, dataPub, func(user string) bool { return user == victimPub }, pageSize)
	if err != nil {
		t.Fatalf("evict: %v", err)
	}
	if n != 2 {
		t.Errorf("evicted %d connections, want 2", n)
	}
	closed := map[*nats.Conn]bool{}
	for len(closed) < 2 {
		select {
		case nc := <-gone:
			if nc == stays {
				t.Fatal("the bystander was disconnected")
			}
			closed[nc] = true
		case <-time.After(deadline):
			t.Fatalf("victims not disconnected: on a %v, on b %v", closed[onA], closed[onB])
		}
	}
	if err := stays.Flush(); err != nil || !stays.IsConnected() {
		t.Errorf("the bystander is not connected: %v", err)
	}
}

// evictServer starts an operator-mode nats-server on loopback, random ports, in a cluster
// with the server at route if route is not nil, and shuts it down when the test ends.
func evictServer(t *testing.T, opJWT, sysPub string, accounts map[string]string, route net.Addr) *server.Server {
	t.Helper()
	op, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatal(err)
	}
	res := &server.MemAccResolver{}
	for pub, token := range accounts {
		if err := res.Store(pub, token); err != nil {
			t.Fatal(err)
		}
	}
	opts := &server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Cluster:          server.ClusterOpts{Name: "evict", Host: "127.0.0.1", Port: -1},
		TrustedOperators: []*jwt.OperatorClaims{op},
		SystemAccount:    sysPub,
		AccountResolver:  res,
	}
	if route != nil {
		opts.Routes = server.RoutesFromStr("nats://" + route.String())
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(deadline) {
		t.Fatal("server not ready")
	}
	if route != nil {
		evictWait(t, "the route", func() bool { return s.NumRoutes() > 0 })
	}
	return s
}

// evictWait polls cond until it holds, failing the test after deadline.
func evictWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for until := time.Now().Add(deadline); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(until) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// evictConnect connects to s as user (a fresh one if nil) of acct, without reconnecting,
// closed when the test ends.
func evictConnect(t *testing.T, s *server.Server, acct, user nkeys.KeyPair, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if user == nil {
		user, _ = nkeys.CreateUser()
	}
	pub, _ := user.PublicKey()
	token := evictSign(t, jwt.NewUserClaims(pub), acct)
	seed, _ := user.Seed()
	nc, err := nats.Connect(s.ClientURL(), append(opts, nats.UserJWTAndSeed(token, string(seed)), nats.NoReconnect())...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// evictSign encodes claims signed by kp.
func evictSign(t *testing.T, claims jwt.Claims, kp nkeys.KeyPair) string {
	t.Helper()
	token, err := claims.Encode(kp)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
