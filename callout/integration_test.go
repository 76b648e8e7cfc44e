package callout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// deadline guards every wait against a hang; nothing waits for it to pass.
const deadline = 10 * time.Second

// calloutBroker is an embedded nats-server in operator mode with SYS, a data account and
// an AUTH account whose connects go to the callout.
type calloutBroker struct {
	url              string
	keys             keys
	calloutJWT       string
	calloutSeed      []byte
	sentinelJWT      string
	sentinelSeed     []byte
	observerJWT      string // a static user of the data account
	observerSeed     []byte
	dataPub, authPub string
	calloutUser      string
	operator, sysAcc nkeys.KeyPair
	resolver         *server.MemAccResolver
}

func userCreds(t *testing.T, signer nkeys.KeyPair, issuerAccount string, edit func(*jwt.UserClaims)) (string, []byte, string) {
	t.Helper()
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	uc := jwt.NewUserClaims(pub(t, u))
	if issuerAccount != pub(t, signer) {
		uc.IssuerAccount = issuerAccount
	}
	if edit != nil {
		edit(uc)
	}
	tok, err := uc.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := u.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return tok, seed, pub(t, u)
}

func startCalloutBroker(t *testing.T) *calloutBroker {
	t.Helper()
	return startCalloutBrokerWaiting(t, 1)
}

// startCalloutBrokerWaiting is startCalloutBroker whose server waits authTimeout seconds
// for a callout answer.
func startCalloutBrokerWaiting(t *testing.T, authTimeout float64) *calloutBroker {
	t.Helper()
	b := &calloutBroker{keys: newKeys(t), resolver: &server.MemAccResolver{}}
	op, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	b.operator = op
	oc := jwt.NewOperatorClaims(pub(t, op))
	oc.Name = "test-operator"
	opJWT, err := oc.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	operatorClaims, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatal(err)
	}
	store := func(ac *jwt.AccountClaims) {
		tok, err := ac.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.resolver.Store(ac.Subject, tok); err != nil {
			t.Fatal(err)
		}
	}
	b.sysAcc = accountKey(t)
	sys := jwt.NewAccountClaims(pub(t, b.sysAcc))
	sys.Name = "SYS"
	store(sys)

	k := b.keys
	b.dataPub, b.authPub = pub(t, k.dataAcc), pub(t, k.calloutAcc)
	data := jwt.NewAccountClaims(b.dataPub)
	data.Name = "data"
	data.SigningKeys.Add(pub(t, k.dataSK))
	store(data)

	// The callout user, signed by the AUTH account's signing key.
	b.calloutJWT, b.calloutSeed, b.calloutUser = userCreds(t, k.calloutSK, b.authPub, func(uc *jwt.UserClaims) { uc.Name = "callout" })
	auth := jwt.NewAccountClaims(b.authPub)
	auth.Name = "AUTH_test"
	auth.SigningKeys.Add(pub(t, k.calloutSK))
	auth.Limits.JetStreamLimits = jwt.JetStreamLimits{}
	auth.Authorization.AuthUsers.Add(b.calloutUser)
	auth.Authorization.AllowedAccounts.Add(b.dataPub)
	auth.Authorization.XKey = k.xpub
	store(auth)

	// The sentinel: an AUTH account bearer that may do nothing.
	b.sentinelJWT, b.sentinelSeed, _ = userCreds(t, k.calloutSK, b.authPub, func(uc *jwt.UserClaims) {
		uc.Name = "sentinel"
		uc.BearerToken = true
		uc.Pub.Deny.Add(">")
		uc.Sub.Deny.Add(">")
	})
	b.observerJWT, b.observerSeed, _ = userCreds(t, k.dataSK, b.dataPub, func(uc *jwt.UserClaims) { uc.Name = "observer" })

	b.url = startServer(t, &server.Options{
		TrustedOperators: []*jwt.OperatorClaims{operatorClaims},
		SystemAccount:    pub(t, b.sysAcc),
		AccountResolver:  b.resolver,
		AuthTimeout:      authTimeout, // seconds; bounds the wait for a callout that never answers
	}).ClientURL()
	return b
}

func (b *calloutBroker) connect(t *testing.T, jwtTok string, seed []byte, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	opts = append([]nats.Option{nats.UserJWTAndSeed(jwtTok, string(seed)), nats.Timeout(deadline), nats.NoReconnect()}, opts...)
	return nats.Connect(b.url, opts...)
}

// TestCalloutOnRealServer: a sentinel connect with a good bearer lands in the data account
// with the Authorizer's permissions, a bad bearer is refused, and with no responder the
// connect fails.
func TestCalloutOnRealServer(t *testing.T) {
	b := startCalloutBroker(t)
	r := newBrokerResponder(t, b, false)
	calloutConn, err := b.connect(t, b.calloutJWT, b.calloutSeed, nats.Name("cotal:auth-service:test"))
	if err != nil {
		t.Fatalf("callout connect: %v", err)
	}
	defer calloutConn.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, r, calloutConn)

	observer, err := b.connect(t, b.observerJWT, b.observerSeed)
	if err != nil {
		t.Fatalf("observer connect: %v", err)
	}
	defer observer.Close()
	seen, err := observer.SubscribeSync("data.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}

	asyncErrs := make(chan error, 8)
	client, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { asyncErrs <- err }))
	if err != nil {
		t.Fatalf("good bearer refused: %v", err)
	}
	defer client.Close()

	// Its own subscription under data.> works: the Authorizer's permissions, not deny-all.
	own, err := client.SubscribeSync("data.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Publish("data.x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := own.NextMsg(deadline); err != nil || string(m.Data) != "hi" {
		t.Fatalf("client's own message: %v, %v", m, err)
	}
	// And it is in the data account: the data account's observer sees the message.
	if m, err := seen.NextMsg(deadline); err != nil || m.Subject != "data.x" {
		t.Fatalf("observer: %v, %v", m, err)
	}
	// Outside data.> it is denied.
	if err := client.Publish("other.x", []byte("no")); err != nil {
		t.Fatal(err)
	}
	if err := client.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-asyncErrs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("async error %v, want a permissions violation", err)
		}
	case <-time.After(deadline):
		t.Fatal("publish outside the grant was not refused")
	}
	if r.CachedKeys() != 1 {
		t.Fatalf("cached keys %d, want the server's one", r.CachedKeys())
	}

	// A bad bearer is refused with the responder's signed error.
	if nc, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("bad")); err == nil {
		nc.Close()
		t.Fatal("bad bearer connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("bad bearer: %v", err)
	}

	// With the responder stopped, the connect fails on the server's timeout.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("responder run: %v", err)
	}
	if err := calloutConn.Flush(); err != nil { // the unsubscribe is on the server
		t.Fatal(err)
	}
	if nc, err := b.connect(t, b.sentinelJWT, b.sentinelSeed, nats.Token("good")); err == nil {
		nc.Close()
		t.Fatal("connected with no responder")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("no responder: %v", err)
	}

	// A responder whose connection closes stops with nats.ErrConnectionClosed.
	nc2, err := b.connect(t, b.calloutJWT, b.calloutSeed)
	if err != nil {
		t.Fatal(err)
	}
	stopsWhenClosed(t, nc2, runReady(t, t.Context(), r, nc2))
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runReady runs r on nc until ctx ends, waits until it serves, and returns the channel
// Run's result arrives on.
func runReady(t *testing.T, ctx context.Context, r *Responder, nc *nats.Conn) <-chan error {
	t.Helper()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, nc, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("responder: %v", err)
	case <-time.After(deadline):
		t.Fatal("responder not ready")
	}
	return done
}

// stopsWhenClosed closes nc and checks that the responder running on it, whose result
// arrives on done, returns nats.ErrConnectionClosed.
func stopsWhenClosed(t *testing.T, nc *nats.Conn, done <-chan error) {
	t.Helper()
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("run after close: %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("run did not stop when its connection closed")
	}
}

// startServer starts an in-process nats-server with opts on a random loopback port, quiet,
// and stops it when the test ends.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(deadline) {
		t.Fatal("server not ready")
	}
	return s
}
