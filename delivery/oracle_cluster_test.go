package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// TestOracleCluster: the liveness oracle, connected to one server of a two-server cluster,
// answers for a plane connection on the other: live while it is open, gone once it closed,
// over a system connection and over the account's own CONNZ import alike.
func TestOracleCluster(t *testing.T) {
	chain := meshtest.Chain(t, space)
	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	servers := meshtest.Cluster(t, chain, 2)
	a, b := servers[0], servers[1]
	mint := func(spec trust.UserSpec) []byte {
		creds, err := acct.Mint(spec)
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	oracles := map[string]*oracle{
		"system connection": {nc: meshtest.SystemConn(t, chain, a.ClientURL()), account: acct.PublicKey()},
		"account import":    {nc: meshtest.ConnectTo(t, a.ClientURL(), mint(meshtest.DeliverySpec()))},
	}

	holderCreds := mint(meshtest.ProvisionerSpec("plane"))
	holder := meshtest.ConnectTo(t, b.ClientURL(), holderCreds)
	cid, err := holder.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	pub := meshtest.UserKey(t, holderCreds)
	tuple := protocol.ConnTuple{ServerID: b.ID(), CID: cid, UserNkey: pub}
	args := protocol.LivenessArgs{Ledger: tuple, Records: tuple}

	for name, o := range oracles {
		if res := o.liveness(t.Context(), args); !res.SweepComplete || res.Ledger.State != protocol.ConnLive {
			t.Errorf("%s, holder open: %+v", name, res)
		}
	}
	// A server the cluster does not know may be a member cut off from it: unknown.
	stranger := protocol.ConnTuple{ServerID: "NSTRANGER", CID: cid, UserNkey: pub}
	for name, o := range oracles {
		res := o.liveness(t.Context(), protocol.LivenessArgs{Ledger: stranger, Records: stranger})
		if res.Ledger.State != protocol.ConnUnknown || res.Records.State != protocol.ConnUnknown {
			t.Errorf("%s, a server not in the cluster: %+v", name, res)
		}
	}
	holder.Close()
	for name, o := range oracles {
		var res protocol.LivenessResult
		meshtest.Until(t, name+": the closed holder reads gone", deadline, func() bool {
			res = o.liveness(t.Context(), args)
			return res.Ledger.State == protocol.ConnGone
		})
		if !res.SweepComplete || res.Records.State != protocol.ConnGone {
			t.Errorf("%s, holder closed: %+v", name, res)
		}
	}
}

// TestOracleAfterBrokerRestart: on a standalone broker that restarted (a new server id), a
// plane connection of the previous run reads gone, saying why, so a crashed auth service's
// successor can reclaim its plane.
func TestOracleAfterBrokerRestart(t *testing.T) {
	m := newMesh(t, 30*time.Second)
	holderCreds := m.Mint(space, meshtest.ProvisionerSpec("plane"))
	holder := m.Connect(holderCreds, nats.NoReconnect()) // a plane connection never reconnects
	cid, err := holder.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	tuple := protocol.ConnTuple{ServerID: holder.ConnectedServerId(), CID: cid, UserNkey: meshtest.UserKey(t, holderCreds)}
	m.restart()
	if m.prov.ConnectedServerId() == tuple.ServerID {
		t.Fatal("the restarted broker kept its server id")
	}
	oracles := map[string]*oracle{
		"system connection": {nc: meshtest.SystemConn(t, m.Chain, m.URL), account: m.Account(space).PublicKey()},
		"account import":    {nc: m.Connect(m.Mint(space, meshtest.DeliverySpec()))},
	}
	for name, o := range oracles {
		res := o.liveness(t.Context(), protocol.LivenessArgs{Ledger: tuple, Records: tuple})
		if !res.SweepComplete || res.Ledger.State != protocol.ConnGone || !strings.Contains(res.Note, "no longer runs") {
			t.Errorf("%s: %+v", name, res)
		}
	}
}
