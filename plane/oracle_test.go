package plane

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/meshtest"
)

// TestRealOracle: with the space's delivery daemon, a claim held by two open connections
// refuses live-peer; once both are closed the daemon reports them gone and the next claim
// reclaims the plane at generation 2.
func TestRealOracle(t *testing.T) {
	m := newMesh(t)
	m.daemon()
	ctx := t.Context()
	ledgerNC, ledger := m.scanner("cotal:auth-scan:team")
	recordsNC, records := m.scanner("cotal:auth-records:team")
	holder, err := m.claimer(m.oracle(), ledger, records).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, mineL := m.scanner("successor ledger")
	_, mineR := m.scanner("successor records")
	successor := m.claimer(m.oracle(), mineL, mineR)

	_, err = successor.Acquire(ctx)
	if !Refused(err, ReasonLivePeer) || !strings.Contains(err.Error(), "on server "+ledger.ServerID+" is live") {
		t.Fatalf("a live holder: %v", err)
	}
	ledgerNC.Close()
	// The broker notices the close asynchronously: until it does, the ledger connection
	// still reads live.
	meshtest.Until(t, "the refusal names the records connection", deadline, func() bool {
		_, err = successor.Acquire(ctx)
		if !Refused(err, ReasonLivePeer) {
			t.Fatalf("a holder with its records connection open: %v", err)
		}
		return strings.Contains(err.Error(), "records connection")
	})
	recordsNC.Close()
	var cl *Claim
	meshtest.Until(t, "the closed holder reclaimed", deadline, func() bool {
		cl, err = successor.Acquire(ctx)
		if err != nil && !Refused(err, ReasonLivePeer) {
			t.Fatalf("a closed holder: %v", err)
		}
		return err == nil
	})
	if row, _ := m.stored(); row.Generation != 2 || row.ClaimID != cl.Row().ClaimID || row.Ledger != mineL || row.Records != mineR {
		t.Fatalf("after the reclaim: %+v", row)
	}
	if err := holder.Release(ctx); !Refused(err, ReasonLost) {
		t.Fatalf("the old holder's release: %v", err)
	}
}

// TestNoDaemon: without a delivery daemon the oracle gets no answer, and a held claim
// refuses unknown, naming the daemon.
func TestNoDaemon(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	_, ledger := m.scanner("ledger")
	_, records := m.scanner("records")
	if _, err := m.claimer(never(t), ledger, records).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := m.claimer(m.oracle(), fakeTuple(1), fakeTuple(2)).Acquire(ctx)
	if !Refused(err, ReasonUnknown) || !strings.Contains(err.Error(), "no delivery daemon answers") {
		t.Fatalf("no daemon: %v", err)
	}
}

// TestConnTuple: the tuple of a connection names its server and client id; a malformed
// user key or a closed connection is an error.
func TestConnTuple(t *testing.T) {
	m := newMesh(t)
	nc, pub := m.connect(m.Mint(space, meshtest.ProvisionerSpec("x")))
	tu, err := ConnTuple(nc, pub)
	cid, _ := nc.GetClientID()
	if err != nil || tu.CID != cid || tu.ServerID != nc.ConnectedServerId() || tu.UserNkey != pub {
		t.Fatalf("tuple %+v, %v", tu, err)
	}
	if _, err := ConnTuple(nc, "nope"); err == nil {
		t.Fatal("a malformed user key was accepted")
	}
	nc.Close()
	if _, err := ConnTuple(nc, pub); err == nil {
		t.Fatal("a closed connection has a tuple")
	}
}

// TestReclaimAfterBrokerRestart: a claim held when the (standalone) broker went down, as in
// a machine crash, is reclaimed after the restart: the holder's connections named the
// broker's previous run, which the oracle reads gone.
func TestReclaimAfterBrokerRestart(t *testing.T) {
	m := newMesh(t)
	m.daemon()
	ctx := t.Context()
	_, ledger := m.scanner("cotal:auth-scan:team")
	_, records := m.scanner("cotal:auth-records:team")
	if _, err := m.claimer(m.oracle(), ledger, records).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	m.Restart()
	_, mineL := m.scanner("successor ledger")
	_, mineR := m.scanner("successor records")
	successor := m.claimer(m.oracle(), mineL, mineR)
	var err error
	meshtest.Until(t, "the plane reclaimed after the restart", deadline, func() bool {
		_, err = successor.Acquire(ctx)
		if err != nil && !Refused(err, ReasonUnknown) {
			t.Fatalf("after the restart: %v", err)
		}
		return err == nil
	})
	if row, _ := m.stored(); row.Generation != 2 || row.Ledger != mineL {
		t.Fatalf("after the reclaim: %+v", row)
	}
}
