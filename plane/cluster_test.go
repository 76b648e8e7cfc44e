package plane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// TestClaimHeldWhileNodeDown: on a three-node cluster the plane is held by connections on
// node C. While C is down, the liveness oracle (the delivery daemon, on node A) answers
// unknown, never gone, for them, and a successor's claim is refused unknown: the plane is
// not reclaimed from a holder that may be alive on a node the survivors cannot see. Node
// C coming back under a new server id does not make it gone either.
func TestClaimHeldWhileNodeDown(t *testing.T) {
	chain := meshtest.Chain(t, space)
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	nodes := brokertest.StartCluster(t, 3, func(_ int, s *broker.Server) {
		s.OperatorJWT, s.SystemAccount, s.Accounts = chain.OperatorJWT(), chain.SystemAccount(), accounts
		s.Cluster.Secret = chain.RouteSecret()
	})
	a, c := nodes[0], nodes[2]
	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(name string) []byte {
		creds, err := acct.Mint(meshtest.ProvisionerSpec(name))
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	prov := meshtest.ConnectTo(t, a.ClientURL(), mint("prov"))
	js, err := jetstream.New(prov)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second) // hang guard
	defer cancel()
	meshtest.ProvisionCluster(t, js, space, provision.Options{Replicas: 3, Peers: 3})
	kv := meshtest.AuthBucket(t, js, space)

	lane := &delivery.Lane{Space: space, Server: a.ClientURL(), Logger: brokertest.Logger(t),
		Creds: func() []byte {
			creds, err := acct.Mint(meshtest.DeliverySpec())
			if err != nil {
				t.Fatal(err)
			}
			return creds
		}(), ReconnectWait: 50 * time.Millisecond, OpTimeout: 20 * time.Second} // a write may wait for a bucket leader that was on C
	deliverytest.Serve(t, lane)
	oracle := &DaemonOracle{Conn: prov, Space: space, From: op(), Timeout: 10 * time.Second}

	scanner := func(url, name string) protocol.ConnTuple {
		creds := mint(name)
		nc := meshtest.ConnectTo(t, url, creds, nats.NoReconnect()) // a plane connection never reconnects
		tu, err := ConnTuple(nc, meshtest.UserKey(t, creds))
		if err != nil {
			t.Fatal(err)
		}
		return tu
	}
	ledger, records := scanner(c.ClientURL(), "holder ledger"), scanner(c.ClientURL(), "holder records")
	claimer := func(l, r protocol.ConnTuple) *Claimer {
		return &Claimer{Space: space, KV: kv, Oracle: oracle, Ledger: l, Records: r, Logger: brokertest.Logger(t)}
	}
	if _, err := claimer(ledger, records).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	successor := claimer(scanner(a.ClientURL(), "successor ledger"), scanner(a.ClientURL(), "successor records"))
	if _, err := successor.Acquire(ctx); !Refused(err, ReasonLivePeer) {
		t.Fatalf("the holder on node C, up: %v", err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	args := protocol.LivenessArgs{Ledger: ledger, Records: records}
	res, err := oracle.Liveness(ctx, args)
	if err != nil || res.Ledger.State != protocol.ConnUnknown || res.Records.State != protocol.ConnUnknown {
		t.Fatalf("node C down: %+v, %v", res, err)
	}
	if _, err := successor.Acquire(ctx); !Refused(err, ReasonUnknown) {
		t.Fatalf("node C down: the successor's claim: %v", err)
	}
	row, _ := storedRow(t, kv)
	if row.Generation != 1 || row.Ledger != ledger {
		t.Fatalf("node C down: the plane row changed: %+v", row)
	}

	back := brokertest.Restart(t, c, nodes[0], nodes[1])
	if back.ClientURL() == "" {
		t.Fatal("node C did not come back")
	}
	res, err = oracle.Liveness(ctx, args)
	if err != nil || res.Ledger.State == protocol.ConnGone || res.Records.State == protocol.ConnGone {
		t.Fatalf("node C back under a new id: %+v, %v", res, err)
	}
	if !strings.Contains(res.Note, ledger.ServerID) {
		t.Fatalf("the note does not name the holder's server: %q", res.Note)
	}
}

// storedRow reads the plane row of kv.
func storedRow(t *testing.T, kv jetstream.KeyValue) (Row, uint64) {
	t.Helper()
	e, err := kv.Get(t.Context(), Key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRow(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	return r, e.Revision()
}
