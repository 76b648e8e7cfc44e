// Package meshtest sets up a mesh for integration tests: a trust chain in t.TempDir(), the
// accounts of the test's spaces, an operator-mode broker that trusts the chain (see
// broker/brokertest), and the credentials, connections and provisioning the tests build on.
// Every function fails the test on error; connections are closed and brokers stopped when
// the test ends.
package meshtest

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// Mesh is an operator-mode broker and the trust chain it trusts.
type Mesh struct {
	// Chain is the trust chain: the operator, the system account and the space accounts.
	Chain *trust.Chain
	// Server is the running broker; Restart replaces it.
	Server *broker.Server
	// URL is the broker's client URL; Restart keeps it.
	URL string

	t testing.TB
}

// Start opens a trust chain in t.TempDir(), creates the account of each of spaces, and
// starts a broker trusting the chain (see Serve).
func Start(t testing.TB, spaces ...string) *Mesh {
	t.Helper()
	return Serve(t, Chain(t, spaces...))
}

// Chain opens a trust chain in t.TempDir() with the account of each of spaces.
func Chain(t testing.TB, spaces ...string) *trust.Chain {
	t.Helper()
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spaces {
		if _, err := chain.Space(s); err != nil {
			t.Fatal(err)
		}
	}
	return chain
}

// Serve starts an operator-mode broker (brokertest.StartOperator) trusting chain, with
// every account on disk served from its resolver.
func Serve(t testing.TB, chain *trust.Chain) *Mesh {
	t.Helper()
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	srv := brokertest.StartOperator(t, chain.OperatorJWT(), chain.SystemAccount(), accounts)
	return &Mesh{Chain: chain, Server: srv, URL: srv.ClientURL(), t: t}
}

// Restart stops the broker and starts it again on the same port and store, serving the
// accounts now on disk. Connections made before see a broker outage.
func (m *Mesh) Restart() {
	m.t.Helper()
	u, err := url.Parse(m.URL)
	if err != nil {
		m.t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		m.t.Fatal(err)
	}
	if err := m.Server.Close(); err != nil {
		m.t.Fatal(err)
	}
	accounts, err := m.Chain.AccountJWTs()
	if err != nil {
		m.t.Fatal(err)
	}
	srv := &broker.Server{Dir: m.Server.Dir, Port: port, Logger: brokertest.Logger(m.t),
		OperatorJWT: m.Chain.OperatorJWT(), SystemAccount: m.Chain.SystemAccount(), Accounts: accounts}
	if err := srv.Start(m.t.Context()); err != nil {
		m.t.Fatalf("restart operator-mode broker: %v", err)
	}
	m.t.Cleanup(func() { _ = srv.Close() })
	m.Server, m.URL = srv, srv.ClientURL()
}

// Account is the account of space, created when it has none yet.
func (m *Mesh) Account(space string) *trust.Account {
	m.t.Helper()
	a, err := m.Chain.Space(space)
	if err != nil {
		m.t.Fatal(err)
	}
	return a
}

// Mint mints a credential of space's account to spec and returns its creds file.
func (m *Mesh) Mint(space string, spec trust.UserSpec) []byte {
	m.t.Helper()
	b, err := m.Account(space).Mint(spec)
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

// Connect connects to the broker as the holder of creds, with opts after the creds'
// options; the connection is closed when the test ends.
func (m *Mesh) Connect(creds []byte, opts ...nats.Option) *nats.Conn {
	m.t.Helper()
	return ConnectTo(m.t, m.URL, creds, opts...)
}

// ProvisionerSpec is a provisioner credential named name, standing for the local actor op.
func ProvisionerSpec(name string) trust.UserSpec {
	return trust.UserSpec{Name: name, Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"}}
}

// DeliverySpec is the credential the delivery daemon of a space runs with.
func DeliverySpec() trust.UserSpec {
	return trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_delivery"}}
}

// Provisioner connects as space's provisioner op (ProvisionerSpec("op")) and returns its
// JetStream context; Conn() is the connection, closed when the test ends.
func (m *Mesh) Provisioner(space string) jetstream.JetStream {
	m.t.Helper()
	js, err := jetstream.New(m.Connect(m.Mint(space, ProvisionerSpec("op"))))
	if err != nil {
		m.t.Fatal(err)
	}
	return js
}

// Provision provisions space with opts as its provisioner and returns the provisioner's
// JetStream context (see Provisioner).
func (m *Mesh) Provision(space string, opts provision.Options) jetstream.JetStream {
	m.t.Helper()
	js := m.Provisioner(space)
	if _, err := provision.Space(m.t.Context(), js, space, opts); err != nil {
		m.t.Fatal(err)
	}
	return js
}

// JetStream starts a broker without authentication (brokertest.Start) and returns a
// JetStream context on a connection to it, closed when the test ends.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// AuthBucket opens the auth bucket (the ledger) of provisioned space.
func AuthBucket(t testing.TB, js jetstream.JetStream, space string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), provision.BucketAuth(space))
	if err != nil {
		t.Fatalf("auth bucket: %v", err)
	}
	return kv
}

// Until re-checks cond until it holds, and fails the test with what when it does not hold
// within deadline. It is the one way tests here poll a condition they cannot wait on as an
// event. The deadline is a hang guard on the condition, not a timing assumption: the test
// says what must become true, never how soon, so give a deadline only a hang reaches. The
// re-check interval starts at 20 ms and doubles up to 100 ms, so a condition that dials or
// asks the broker does not flood it while it waits.
func Until(t testing.TB, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	interval := 20 * time.Millisecond
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(interval) // the re-check interval, not a wait for time to pass
		interval = min(2*interval, 100*time.Millisecond)
	}
}
