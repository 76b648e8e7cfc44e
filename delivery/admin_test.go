package delivery

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// admin sends op with args on the delivery-admin rail as the provisioner and decodes an
// answer's data into out.
func (m *mesh) admin(t *testing.T, op string, a any, out any) protocol.ControlReply {
	t.Helper()
	caller := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "op"}
	rep := m.rawRequest(m.prov, nil, "", protocol.CtlSubject(space, protocol.ServiceDeliveryAdmin, caller),
		protocol.ControlRequest{Op: op, Args: args(t, a), From: protocol.EndpointRef{ID: caller.String()}})
	if rep.OK && out != nil {
		if err := json.Unmarshal(rep.Data, out); err != nil {
			t.Fatalf("%s answer %s: %v", op, rep.Data, err)
		}
	}
	return rep
}

// principalLiveness asks whether p has an open connection.
func (m *mesh) principalLiveness(t *testing.T, p string) protocol.PrincipalLivenessResult {
	t.Helper()
	var res protocol.PrincipalLivenessResult
	if rep := m.admin(t, protocol.OpPrincipalLiveness, protocol.PrincipalArgs{Principal: p}, &res); !rep.OK {
		t.Fatalf("principalLiveness %s refused: %s", p, rep.Error)
	}
	if res.Principal != p {
		t.Fatalf("principalLiveness %s answered for %q", p, res.Principal)
	}
	return res
}

// adminLane is a lane with the system credentials cotal up would give it.
func (m *mesh) adminLane(t *testing.T, evict bool) *Lane {
	t.Helper()
	l := m.lane()
	sys, err := m.Chain.WatchCreds(space)
	if err != nil {
		t.Fatal(err)
	}
	l.SystemCreds = sys
	if evict {
		if l.EvictCreds, err = m.Chain.EvictCreds(space); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestAdminPrincipalOps: principalLiveness reports a principal with an open connection
// live and one without gone; evictPrincipal closes every connection of exactly that
// principal (not local.ada2, whose name starts like local.ada's, nor bob's) and says
// verifiedGone once a complete sweep finds none; evictPrincipals answers one result per
// principal in request order.
func TestAdminPrincipalOps(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.adminLane(t, true))
	ada := m.agent("ada", "general")
	adaA, adaB := m.Connect(ada, nats.NoReconnect()), m.Connect(ada, nats.NoReconnect())
	ada2 := m.Connect(m.agent("ada2", "general"), nats.NoReconnect())
	bob := m.Connect(m.agent("bob", "general"), nats.NoReconnect())

	for _, p := range []string{"local.ada", "local.ada2", "local.bob"} {
		if res := m.principalLiveness(t, p); res.State != protocol.ConnLive || !res.SweepComplete {
			t.Fatalf("%s with open connections: %+v", p, res)
		}
	}
	if res := m.principalLiveness(t, "local.nobody"); res.State != protocol.ConnGone || !res.SweepComplete {
		t.Fatalf("a principal without connections: %+v", res)
	}

	var ev protocol.EvictionResult
	if rep := m.admin(t, protocol.OpEvictPrincipal, protocol.PrincipalArgs{Principal: "local.ada"}, &ev); !rep.OK {
		t.Fatalf("evictPrincipal refused: %s", rep.Error)
	}
	if ev != (protocol.EvictionResult{Principal: "local.ada", Kicked: 2, VerifiedGone: true, ScanComplete: true}) {
		t.Fatalf("evict local.ada: %+v", ev)
	}
	meshtest.Until(t, "ada's connections closed by the broker", deadline, func() bool { return adaA.IsClosed() && adaB.IsClosed() })
	for name, nc := range map[string]*nats.Conn{"ada2": ada2, "bob": bob} {
		if err := nc.Flush(); err != nil || !nc.IsConnected() {
			t.Fatalf("%s's connection after ada's eviction: %v", name, err)
		}
	}
	if res := m.principalLiveness(t, "local.ada"); res.State != protocol.ConnGone {
		t.Fatalf("local.ada after its eviction: %+v", res)
	}
	if res := m.principalLiveness(t, "local.ada2"); res.State != protocol.ConnLive {
		t.Fatalf("local.ada2 after local.ada's eviction: %+v", res)
	}

	var evs []protocol.EvictionResult
	asked := []string{"local.bob", "local.nobody", "local.ada2"}
	if rep := m.admin(t, protocol.OpEvictPrincipals, protocol.PrincipalsArgs{Principals: asked}, &evs); !rep.OK {
		t.Fatalf("evictPrincipals refused: %s", rep.Error)
	}
	if len(evs) != len(asked) {
		t.Fatalf("evictPrincipals answered %d results for %d principals", len(evs), len(asked))
	}
	for i, want := range []int{1, 0, 1} {
		if e := evs[i]; e.Principal != asked[i] || e.Kicked != want || e.Remaining != 0 || !e.VerifiedGone || !e.ScanComplete {
			t.Errorf("result %d: %+v, want %s verified gone after %d kicks", i, e, asked[i], want)
		}
	}
	meshtest.Until(t, "bob's and ada2's connections closed", deadline, func() bool { return bob.IsClosed() && ada2.IsClosed() })
}

// TestAdminRefusals: without a system connection every principal op is refused, and
// without an evict credential the evictions are (principalLiveness still answers); a
// malformed principal, an unknown key, an empty or too large batch are refused.
func TestAdminRefusals(t *testing.T) {
	m := newMesh(t, 0)
	one := protocol.PrincipalArgs{Principal: "local.ada"}
	all := protocol.PrincipalsArgs{Principals: []string{"local.ada"}}

	d := serve(t, m.lane()) // no system credential: the account's CONNZ import only
	for _, c := range []struct {
		op string
		a  any
	}{{protocol.OpPrincipalLiveness, one}, {protocol.OpEvictPrincipal, one}, {protocol.OpEvictPrincipals, all}} {
		if rep := m.admin(t, c.op, c.a, nil); rep.OK || !strings.Contains(rep.Error, "no system-account connection") {
			t.Errorf("%s without a system connection: %+v", c.op, rep)
		}
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}

	serve(t, m.adminLane(t, false))
	m.Connect(m.agent("ada", "general"))
	if res := m.principalLiveness(t, "local.ada"); res.State != protocol.ConnLive {
		t.Fatalf("principalLiveness without an evict credential: %+v", res)
	}
	for _, c := range []struct {
		op string
		a  any
	}{{protocol.OpEvictPrincipal, one}, {protocol.OpEvictPrincipals, all}} {
		if rep := m.admin(t, c.op, c.a, nil); rep.OK || !strings.Contains(rep.Error, "no evict credential") {
			t.Errorf("%s without an evict credential: %+v", c.op, rep)
		}
	}

	many := make([]string, protocol.EvictPrincipalsMax+1)
	for i := range many {
		many[i] = "local.a"
	}
	for _, c := range []struct {
		op  string
		raw string
	}{
		{protocol.OpPrincipalLiveness, `{}`},
		{protocol.OpPrincipalLiveness, `{"principal":"local.ada","x":1}`},
		{protocol.OpPrincipalLiveness, `{"principal":"foo.bar"}`},
		{protocol.OpPrincipalLiveness, `{"principal":" local.ada"}`},
		{protocol.OpPrincipalLiveness, `{"principal":"local.a.b"}`},
		{protocol.OpEvictPrincipal, `{"principal":"UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVW.ada"}`},
		{protocol.OpEvictPrincipal, `{"principals":["local.ada"]}`},
		{protocol.OpEvictPrincipals, `{"principals":[]}`},
		{protocol.OpEvictPrincipals, `{"principals":["local.ada","local"]}`},
		{protocol.OpEvictPrincipals, `{"principal":"local.ada"}`},
		{protocol.OpEvictPrincipals, string(args(t, protocol.PrincipalsArgs{Principals: many}))},
	} {
		rep := m.admin(t, c.op, json.RawMessage(c.raw), nil)
		if rep.OK || !strings.HasPrefix(rep.Error, "args:") {
			t.Errorf("%s %.80s: %+v, want a refusal of the args", c.op, c.raw, rep)
		}
	}
}

// TestAdminRailRefusesAgents: an agent credential cannot ask the daemon to evict anybody:
// the broker refuses its request on the delivery-admin rail, and the victim stays
// connected.
func TestAdminRailRefusesAgents(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.adminLane(t, true))
	kicked := make(chan struct{})
	victim := m.Connect(m.agent("ada", "general"), nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(kicked) }))
	errs := make(chan error, 4)
	bob := m.Connect(m.agent("bob", "general"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
	subject := protocol.CtlSubject(space, protocol.ServiceDeliveryAdmin, me)
	body, _ := json.Marshal(protocol.ControlRequest{Op: protocol.OpEvictPrincipal, Args: args(t, protocol.PrincipalArgs{Principal: "local.ada"}),
		From: protocol.EndpointRef{ID: me.String()}})
	if err := bob.PublishRequest(subject, subject+".reply."+protocol.NewLifecycleUID(), body); err != nil {
		t.Fatal(err)
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), subject) {
			t.Fatalf("the agent's admin request: %v, want a permissions violation on %s", err, subject)
		}
	case <-kicked:
		t.Fatal("the agent's request evicted ada")
	case <-time.After(deadline):
		t.Fatal("the agent's admin request was not refused")
	}
	if res := m.principalLiveness(t, "local.ada"); res.State != protocol.ConnLive || victim.IsClosed() {
		t.Fatalf("ada after an agent asked for her eviction: %+v", res)
	}
}

// TestAttribute: a connection counts for the principal its credential names, whole: the
// principal: tag, else a callout user's name, never a prefix of another's.
func TestAttribute(t *testing.T) {
	owner := "u_" + strings.Repeat("a", 26)
	for _, c := range []struct {
		conn connz.Conn
		want string
	}{
		{connz.Conn{User: "UABC", Tags: []string{"owner:local", "actor:ada", "principal:local.ada"}}, "local.ada"},
		{connz.Conn{User: "UABC", Tags: []string{"principal:local.ada2"}}, "local.ada2"},
		{connz.Conn{User: owner + "-ada", Name: "local.bob"}, owner + ".ada"},
		{connz.Conn{User: owner + ".ada"}, owner + ".ada"},
		{connz.Conn{User: "p_" + strings.Repeat("b", 26) + "-ada"}, "p_" + strings.Repeat("b", 26) + ".ada"},
		{connz.Conn{User: "UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVW", Name: "local.ada"}, ""},
		{connz.Conn{User: "foo-ada"}, ""},
		{connz.Conn{User: owner + "-ada", Tags: []string{"principal:nkey.ada"}}, owner + ".ada"},
		{connz.Conn{User: "UABC", Tags: []string{"principal:nkey.ada"}}, ""},
		{connz.Conn{User: "local-ada.x"}, ""},
		// A connection with a user JWT of its own that names no principal, which sent
		// "local-ada" as its CONNECT user: the broker lists that as its user.
		{connz.Conn{User: "local-ada", JWT: "eyJhbGciOi.x.y"}, ""},
		{connz.Conn{User: "local-ada", JWT: "eyJhbGciOi.x.y", Tags: []string{"principal:local.bob"}}, "local.bob"},
	} {
		if got := attribute(c.conn); got != c.want {
			t.Errorf("%+v: %q, want %q", c.conn, got, c.want)
		}
	}
}

// FuzzPrincipalArgs: the decoders accept only the closed objects, with principals the
// sweeps accept and a batch of 1 to EvictPrincipalsMax.
func FuzzPrincipalArgs(f *testing.F) {
	for _, s := range []string{`{"principal":"local.ada"}`, `{"principals":["local.ada","u_aaaaaaaaaaaaaaaaaaaaaaaaaa.b"]}`,
		`{"principal":"local.ada","x":1}`, `{"principals":[]}`, `{"principal":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(b, &keys)
		if p, err := decodePrincipalArgs(b); err == nil {
			if _, perr := sweepPrincipal(p); perr != nil || len(keys) != 1 || keys["principal"] == nil {
				t.Fatalf("%s accepted as %q (%v)", b, p, perr)
			}
		}
		if ps, err := decodePrincipalsArgs(b); err == nil {
			if len(ps) == 0 || len(ps) > protocol.EvictPrincipalsMax || len(keys) != 1 || keys["principals"] == nil {
				t.Fatalf("%s accepted as %q", b, ps)
			}
			for _, p := range ps {
				if _, err := sweepPrincipal(p); err != nil {
					t.Fatalf("%s accepted with %q: %v", b, p, err)
				}
			}
		}
	})
}

// TestEvictCredsAreNarrow: the evict credential may ask a server to close a connection and
// nothing else: listing connections is refused by the broker.
func TestEvictCredsAreNarrow(t *testing.T) {
	m := newMesh(t, 0)
	creds, err := m.Chain.EvictCreds(space)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	nc := m.Connect(creds, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if closed, err := connz.Kick(t.Context(), nc, nc.ConnectedServerId(), 1<<40); err != nil || closed {
		t.Fatalf("a KICK of no connection: %v, %v", closed, err)
	}
	if err := nc.PublishRequest("$SYS.REQ.SERVER.PING.CONNZ", nc.NewInbox(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("CONNZ with the evict credential: %v, want a permissions violation", err)
		}
	case <-time.After(deadline):
		t.Fatal("CONNZ with the evict credential was not refused")
	}
}

// TestTally: a sweep is complete only when every server that had to answer listed all of
// its connections; what it found is attributed either way.
func TestTally(t *testing.T) {
	ada := connz.Conn{CID: 1, Tags: []string{"principal:local.ada"}}
	page := func(server, cluster string, total int, routes ...string) *connz.Page {
		return &connz.Page{Server: server, Cluster: cluster, Conns: []connz.Conn{ada}, Total: total, Routes: routes}
	}
	cases := []struct {
		name          string
		pages, routes []*connz.Page
		routeErr      error
		complete      bool
		note          string
	}{
		{"standalone", []*connz.Page{page("S1", "", 1)}, nil, nil, true, ""},
		{"standalone, cut short", []*connz.Page{page("S1", "", 2)}, nil, nil, false, "server S1 listed 1 of its 2"},
		{"cluster, all listed", []*connz.Page{page("S1", "c", 1), page("S2", "c", 1)},
			[]*connz.Page{page("S1", "c", 0, "S2"), page("S2", "c", 0, "S1")}, nil, true, ""},
		{"cluster, a routed server silent", []*connz.Page{page("S1", "c", 1)},
			[]*connz.Page{page("S1", "c", 0, "S2", "S3")}, nil, false, "no connection listing from server S2, S3"},
		{"cluster, no routes", []*connz.Page{page("S1", "c", 1)}, nil, errors.New("denied"), false, "ROUTEZ: denied"},
	}
	for _, c := range cases {
		s := tally(c.pages, c.routes, c.routeErr)
		if s.complete != c.complete || !strings.Contains(s.note, c.note) || len(s.conns["local.ada"]) != len(c.pages) {
			t.Errorf("%s: %+v", c.name, s)
		}
	}
}

// TestPrincipalLivenessCluster: the oracle on one server of a two-server cluster finds a
// principal's connection on the other, and says gone, from a complete sweep, once it closed.
func TestPrincipalLivenessCluster(t *testing.T) {
	chain := meshtest.Chain(t, space)
	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	servers := meshtest.Cluster(t, chain, 2)
	o := &oracle{nc: meshtest.SystemConn(t, chain, servers[0].ClientURL()), account: acct.PublicKey()}
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "ada"}
	creds, err := acct.Mint(trust.UserSpec{Name: "ada", Profile: trust.ProfileAgent, Principal: p, LifecycleUID: protocol.NewLifecycleUID()})
	if err != nil {
		t.Fatal(err)
	}
	ada := meshtest.ConnectTo(t, servers[1].ClientURL(), creds, nats.NoReconnect())
	if res := o.principalLiveness(t.Context(), p.String()); res.State != protocol.ConnLive || !res.SweepComplete {
		t.Fatalf("open on the other server: %+v", res)
	}
	ada.Close()
	var res protocol.PrincipalLivenessResult
	meshtest.Until(t, "ada reads gone", deadline, func() bool {
		res = o.principalLiveness(t.Context(), p.String())
		return res.State == protocol.ConnGone
	})
	if !res.SweepComplete {
		t.Fatalf("gone from an incomplete sweep: %+v", res)
	}
}

// TestIncompleteSweepVerifiesNothing: when no server answers the listing, an open
// connection's principal reads unknown, never gone, and an eviction kicks nothing and
// verifies nothing.
func TestIncompleteSweepVerifiesNothing(t *testing.T) {
	m := newMesh(t, 0)
	m.Connect(m.agent("ada", "general"))
	acct := m.Account(space)
	// A connection of the space's account, not the system account: no server answers its
	// $SYS.REQ.SERVER.PING.CONNZ.
	nc := m.Connect(m.Mint(space, meshtest.DeliverySpec()))
	ec, err := m.Chain.EvictCreds(space)
	if err != nil {
		t.Fatal(err)
	}
	evictor, err := trust.ReadCreds(ec)
	if err != nil {
		t.Fatal(err)
	}
	l := m.lane()
	o := &oracle{r: &run{cfg: *l, log: l.Logger, opTimeout: l.OpTimeout}, nc: nc, account: acct.PublicKey(), evictor: &evictor}
	if res := o.principalLiveness(t.Context(), "local.ada"); res.State != protocol.ConnUnknown || res.SweepComplete || res.Note == "" {
		t.Fatalf("principalLiveness from no listing: %+v", res)
	}
	res := o.evict(t.Context(), []string{"local.ada", "local.nobody"})
	for _, r := range res {
		if r.VerifiedGone || r.ScanComplete || r.Kicked != 0 || r.Note == "" {
			t.Errorf("an eviction from no listing: %+v", r)
		}
	}
}

// TestAdminRefusesEvictingItself: the daemon refuses to evict its own principal, alone or
// in a batch, and kicks nobody for that request (bob, in the same batch, stays
// connected); it still answers liveness of itself, and keeps serving afterwards.
func TestAdminRefusesEvictingItself(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.adminLane(t, true))
	bob := m.Connect(m.agent("bob", "general"), nats.NoReconnect())
	self := meshtest.DeliverySpec().Principal.String()
	if res := m.principalLiveness(t, self); res.State != protocol.ConnLive {
		t.Fatalf("principalLiveness of the daemon itself: %+v", res)
	}
	for _, c := range []struct {
		op string
		a  any
	}{
		{protocol.OpEvictPrincipal, protocol.PrincipalArgs{Principal: self}},
		{protocol.OpEvictPrincipals, protocol.PrincipalsArgs{Principals: []string{"local.bob", self}}},
	} {
		if rep := m.admin(t, c.op, c.a, nil); rep.OK || !strings.Contains(rep.Error, "this delivery daemon's own") {
			t.Fatalf("%s naming the daemon itself: %+v; want a refusal", c.op, rep)
		}
	}
	if err := bob.Flush(); err != nil || !bob.IsConnected() {
		t.Fatalf("bob's connection after a refused batch: %v", err)
	}
	var ev protocol.EvictionResult
	if rep := m.admin(t, protocol.OpEvictPrincipal, protocol.PrincipalArgs{Principal: "local.bob"}, &ev); !rep.OK || !ev.VerifiedGone {
		t.Fatalf("evict local.bob after the refusals: %+v %+v", rep, ev)
	}
}

// TestAdminIgnoresAChosenUserName: a connection with a credential that names no
// principal, which sends a principal's callout name as its CONNECT user (the broker then
// lists that as its authorized user), is not taken for that principal: it neither makes
// the principal live nor is it kicked by the principal's eviction.
func TestAdminIgnoresAChosenUserName(t *testing.T) {
	m := newMesh(t, 0)
	serve(t, m.adminLane(t, true))
	posing := m.Connect(m.Mint(space, trust.UserSpec{Name: "no principal", Profile: trust.ProfileProvisioner}),
		nats.UserInfo("local-ada", "x"), nats.NoReconnect())
	if res := m.principalLiveness(t, "local.ada"); res.State != protocol.ConnGone || !res.SweepComplete {
		t.Fatalf("local.ada while another connection poses as it: %+v; want gone", res)
	}
	var ev protocol.EvictionResult
	if rep := m.admin(t, protocol.OpEvictPrincipal, protocol.PrincipalArgs{Principal: "local.ada"}, &ev); !rep.OK || ev.Kicked != 0 {
		t.Fatalf("evict local.ada: %+v %+v; want nothing kicked", rep, ev)
	}
	if err := posing.Flush(); err != nil || !posing.IsConnected() {
		t.Fatalf("the posing connection after local.ada's eviction: %v", err)
	}
}
