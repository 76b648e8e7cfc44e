package plane

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// deadline guards every wait against a hang; no test waits for it to pass.
const deadline = 20 * time.Second

const space = "team"

// op is the provisioner's principal; it asks the oracle on the delivery-admin rail.
func op() protocol.Principal { return protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"} }

// mesh is an operator-mode broker serving one provisioned space, its auth bucket and the
// provisioner's connection.
type mesh struct {
	*meshtest.Mesh
	t    testing.TB
	prov *nats.Conn
	kv   jetstream.KeyValue
}

// newMesh starts the broker and provisions the space.
func newMesh(t testing.TB) *mesh {
	t.Helper()
	m := &mesh{Mesh: meshtest.Start(t, space), t: t}
	js := m.Provision(space, provision.Options{})
	m.prov, m.kv = js.Conn(), meshtest.AuthBucket(t, js, space)
	return m
}

// connect connects as the holder of creds and returns the connection and its user nkey.
func (m *mesh) connect(creds []byte) (*nats.Conn, string) {
	m.t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		m.t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(c.Seed))
	if err != nil {
		m.t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		m.t.Fatal(err)
	}
	return m.Connect(creds), pub
}

// scanner opens a connection standing for one of a plane's sealed scanners and returns it
// with its tuple.
func (m *mesh) scanner(name string) (*nats.Conn, protocol.ConnTuple) {
	m.t.Helper()
	nc, pub := m.connect(m.Mint(space, meshtest.ProvisionerSpec(name)))
	tu, err := ConnTuple(nc, pub)
	if err != nil {
		m.t.Fatal(err)
	}
	return nc, tu
}

// daemon runs the space's delivery daemon until the test ends and waits until it serves.
func (m *mesh) daemon() {
	m.t.Helper()
	deliverytest.Serve(m.t, deliverytest.Lane(m.t, m.Mesh, space))
}

// oracle is the real oracle, asked as the provisioner.
func (m *mesh) oracle() *DaemonOracle {
	return &DaemonOracle{Conn: m.prov, Space: space, From: op(), Timeout: 5 * time.Second}
}

// claimer claims for the two tuples with oracle o.
func (m *mesh) claimer(o Oracle, ledger, records protocol.ConnTuple) *Claimer {
	return &Claimer{Space: space, KV: m.kv, Oracle: o, Ledger: ledger, Records: records, Logger: brokertest.Logger(m.t)}
}

// stored reads the plane row and its revision.
func (m *mesh) stored() (Row, uint64) {
	m.t.Helper()
	e, err := m.kv.Get(m.t.Context(), Key)
	if err != nil {
		m.t.Fatal(err)
	}
	r, err := DecodeRow(e.Value())
	if err != nil {
		m.t.Fatal(err)
	}
	return r, e.Revision()
}

// fakeTuple is a well-formed tuple of no real connection.
func fakeTuple(cid uint64) protocol.ConnTuple {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	return protocol.ConnTuple{ServerID: "NFAKESERVER", CID: cid, UserNkey: pub}
}

// oracleFunc is an Oracle from a function.
type oracleFunc func(context.Context, protocol.LivenessArgs) (protocol.LivenessResult, error)

func (f oracleFunc) Liveness(ctx context.Context, a protocol.LivenessArgs) (protocol.LivenessResult, error) {
	return f(ctx, a)
}

// answer is an oracle that says states for the query's tuples, echoing them.
func answer(ledger, records string, complete bool) oracleFunc {
	return func(_ context.Context, a protocol.LivenessArgs) (protocol.LivenessResult, error) {
		return protocol.LivenessResult{Ledger: protocol.TupleState{Tuple: a.Ledger, State: ledger},
			Records: protocol.TupleState{Tuple: a.Records, State: records}, SweepComplete: complete}, nil
	}
}

// never is an oracle the test must not reach.
func never(t testing.TB) oracleFunc {
	return func(context.Context, protocol.LivenessArgs) (protocol.LivenessResult, error) {
		t.Error("the oracle was asked")
		return protocol.LivenessResult{}, nil
	}
}
