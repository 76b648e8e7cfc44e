package delivery

import (
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// TestOracleCluster: the liveness oracle, connected to one server of a two-server cluster,
// answers for a plane connection on the other: live while it is open, gone once it closed,
// over a system connection and over the account's own CONNZ import alike.
func TestOracleCluster(t *testing.T) {
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oracles := map[string]*oracle{
		"system connection": {nc: meshtest.ConnectTo(t, a.ClientURL(), sysCreds), account: acct.PublicKey()},
		"account import":    {nc: meshtest.ConnectTo(t, a.ClientURL(), mint(meshtest.DeliverySpec()))},
	}

	holderCreds := mint(meshtest.ProvisionerSpec("plane"))
	holder := meshtest.ConnectTo(t, b.ClientURL(), holderCreds)
	cid, err := holder.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := trust.ReadCreds(holderCreds)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(c.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	tuple := protocol.ConnTuple{ServerID: b.ID(), CID: cid, UserNkey: pub}
	args := protocol.LivenessArgs{Ledger: tuple, Records: tuple}

	for name, o := range oracles {
		if res := o.liveness(t.Context(), args); !res.SweepComplete || res.Ledger.State != protocol.ConnLive {
			t.Errorf("%s, holder open: %+v", name, res)
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
