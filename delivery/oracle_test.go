package delivery

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// liveness asks the oracle about the two tuples as the provisioner.
func (m *mesh) liveness(t *testing.T, ledger, records protocol.ConnTuple) (protocol.LivenessResult, protocol.ControlReply) {
	t.Helper()
	op := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"}
	rep := m.rawRequest(m.prov, nil, "", protocol.CtlSubject(space, protocol.ServiceDeliveryAdmin, op), protocol.ControlRequest{
		Op: protocol.OpPlaneConnLiveness, Args: args(t, protocol.LivenessArgs{Ledger: ledger, Records: records}), From: protocol.EndpointRef{ID: op.String()}})
	var res protocol.LivenessResult
	if rep.OK {
		if err := json.Unmarshal(rep.Data, &res); err != nil {
			t.Fatal(err)
		}
	}
	return res, rep
}

// tuple names nc's connection as the broker knows it.
func tuple(t *testing.T, nc *nats.Conn, creds []byte) protocol.ConnTuple {
	t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	user := strings.TrimPrefix(c.InboxPrefix, "_INBOX_")
	return protocol.ConnTuple{ServerID: nc.ConnectedServerId(), CID: cid, UserNkey: user}
}

// TestOracle: live for an open connection, gone for a closed one after a complete sweep,
// unknown for another server's or another user's, and unknown, never gone, when the sweep
// cannot complete. Both ways of asking the broker are covered: a system credential and
// the account's own CONNZ import.
func TestOracle(t *testing.T) {
	m := newMesh(t, 0)
	sys, err := m.Chain.WatchCreds(space) // the least-privilege credential cotal up gives the daemon
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sys  []byte
	}{{"system credential", sys}, {"account import", nil}} {
		t.Run(c.name, func(t *testing.T) {
			l := m.lane()
			l.SystemCreds = c.sys
			d := serve(t, l)
			defer func() {
				if err := d.stop(t); err != nil {
					t.Error(err)
				}
			}()
			bobCreds := m.agent("bob", "general")
			bob := m.Connect(bobCreds)
			live := tuple(t, bob, bobCreds)
			carolCreds := m.agent("carol", "general")
			carol := m.Connect(carolCreds)
			closed := tuple(t, carol, carolCreds)
			carol.Close()

			res, rep := m.liveness(t, live, live)
			if !rep.OK || res.Ledger.State != protocol.ConnLive || res.Records.State != protocol.ConnLive || !res.SweepComplete || res.Ledger.Tuple != live {
				t.Fatalf("a live connection: %+v %+v", res, rep)
			}
			meshtest.Until(t, "the closed connection reported gone", deadline, func() bool {
				res, rep := m.liveness(t, closed, live)
				return rep.OK && res.Ledger.State == protocol.ConnGone && res.Records.State == protocol.ConnLive && res.SweepComplete
			})
			// The broker is one standalone server: a server id other than its own is a past
			// run's, whose connections are all gone (TestOracleCluster: in a cluster, unknown).
			other := live
			other.ServerID = "NOTTHISSERVER"
			if res, _ := m.liveness(t, other, closed); res.Ledger.State != protocol.ConnGone || !strings.Contains(res.Note, "server NOTTHISSERVER no longer runs") {
				t.Fatalf("another server's connection: %+v", res)
			}
			wrongUser := live
			wrongUser.UserNkey = closed.UserNkey
			if res, _ := m.liveness(t, wrongUser, live); res.Ledger.State != protocol.ConnUnknown {
				t.Fatalf("another user on the id: %+v", res)
			}
		})
	}

	t.Run("incomplete sweep", func(t *testing.T) {
		other, err := trust.Open(t.TempDir()) // a system credential this broker does not trust
		if err != nil {
			t.Fatal(err)
		}
		bad, err := other.SystemCreds(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		l := m.lane()
		l.SystemCreds = bad
		serve(t, l)
		carolCreds := m.agent("carol", "general")
		carol := m.Connect(carolCreds)
		closed := tuple(t, carol, carolCreds)
		carol.Close()
		res, rep := m.liveness(t, closed, closed)
		if !rep.OK || res.SweepComplete || res.Ledger.State != protocol.ConnUnknown || res.Records.State != protocol.ConnUnknown || res.Note == "" {
			t.Fatalf("an incomplete sweep: %+v %+v", res, rep)
		}
	})
}

// TestOracleRefusesMalformedArgs: the args are a closed object of two valid tuples.
func TestOracleRefusesMalformedArgs(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.lane())
	op := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"}
	subject := protocol.CtlSubject(space, protocol.ServiceDeliveryAdmin, op)
	good := `{"serverId":"S","cid":1,"userNkey":"U` + strings.Repeat("A", 55) + `"}`
	for _, a := range []string{
		`{"ledger":` + good + `}`,
		`{"ledger":` + good + `,"records":` + good + `,"extra":1}`,
		`{"ledger":` + good + `,"records":{"serverId":"S","cid":0,"userNkey":"U` + strings.Repeat("A", 55) + `"}}`,
		`{"ledger":` + good + `,"records":{"serverId":"S","cid":1,"userNkey":"nope"}}`,
		`{"ledger":` + good + `,"records":{"serverId":"","cid":1,"userNkey":"U` + strings.Repeat("A", 55) + `"}}`,
		`{"ledger":` + good + `,"records":{"serverId":"S","cid":1,"userNkey":"U` + strings.Repeat("A", 55) + `","x":1}}`,
	} {
		rep := m.rawRequest(m.prov, nil, "", subject, protocol.ControlRequest{Op: protocol.OpPlaneConnLiveness, Args: json.RawMessage(a)})
		if rep.OK || !strings.HasPrefix(rep.Error, "args:") {
			t.Errorf("args %s: %+v, want a refusal", a, rep)
		}
	}
	// evictPrincipal is answered now (TestAdminPrincipalOps); this daemon has no system
	// connection, so it refuses it for that reason. The reference's reloadCreds is not
	// implemented (docs/interop.md).
	if rep := m.rawRequest(m.prov, nil, "", subject, protocol.ControlRequest{Op: protocol.OpEvictPrincipal,
		Args: json.RawMessage(`{"principal":"local.ada"}`)}); rep.OK || !strings.Contains(rep.Error, "no system-account connection") {
		t.Errorf("evictPrincipal without a system connection: %+v", rep)
	}
	if rep := m.rawRequest(m.prov, nil, "", subject, protocol.ControlRequest{Op: "reloadCreds"}); rep.OK || !strings.Contains(rep.Error, "unknown op") {
		t.Errorf("reloadCreds: %+v", rep)
	}
}

// TestDecide: the verdict table, including the case no broker produces on demand: one
// lookup answered and the other not, where nothing may be reported gone.
func TestDecide(t *testing.T) {
	tu := protocol.ConnTuple{ServerID: "S1", CID: 7, UserNkey: "U1"}
	answered := func(found bool, user string) lookup {
		return lookup{answered: true, server: "S1", found: found, user: user}
	}
	cases := []struct {
		name            string
		ledger, records lookup
		want            [2]string
		complete        bool
	}{
		{"both live", answered(true, "U1"), answered(true, "U1"), [2]string{"live", "live"}, true},
		{"both gone", answered(false, ""), answered(false, ""), [2]string{"gone", "gone"}, true},
		{"half answered", answered(false, ""), lookup{err: "timeout"}, [2]string{"unknown", "unknown"}, false},
		{"live survives an incomplete sweep", answered(true, "U1"), lookup{err: "timeout"}, [2]string{"live", "unknown"}, false},
		{"another server", lookup{answered: true, server: "S2"}, answered(false, ""), [2]string{"unknown", "gone"}, true},
		{"another user", answered(true, "U9"), answered(false, ""), [2]string{"unknown", "gone"}, true},
	}
	for _, c := range cases {
		res := decide(protocol.LivenessArgs{Ledger: tu, Records: tu}, c.ledger, c.records)
		if res.Ledger.State != c.want[0] || res.Records.State != c.want[1] || res.SweepComplete != c.complete {
			t.Errorf("%s: %+v", c.name, res)
		}
	}
}

// TestLivenessArgsForms: the reference's {query: {ledger, records}} and the earlier Go
// {ledger, records} both read; a query with another key does not.
func TestLivenessArgsForms(t *testing.T) {
	tu := `{"serverId":"S","cid":7,"userNkey":"UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`
	for _, in := range []string{`{"query":{"ledger":` + tu + `,"records":` + tu + `}}`, `{"ledger":` + tu + `,"records":` + tu + `}`} {
		if a, err := decodeLivenessArgs([]byte(in)); err != nil || a.Ledger.CID != 7 {
			t.Errorf("%s: %+v, %v", in, a, err)
		}
	}
	if _, err := decodeLivenessArgs([]byte(`{"query":{"ledger":` + tu + `,"records":` + tu + `},"x":1}`)); err == nil {
		t.Error("an unknown key beside query was accepted")
	}
}
