package authsvc

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
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
	chain := meshtest.Chain(t, testSpace)
	acct, err := chain.Space(testSpace)
	if err != nil {
		t.Fatal(err)
	}
	servers := meshtest.Cluster(t, chain, 2)
	a, b := servers[0], servers[1]
	sys := meshtest.SystemConn(t, chain, a.ClientURL())

	mint := func(name string) []byte {
		creds, err := acct.Mint(trust.UserSpec{Name: name, Profile: trust.ProfileObserver,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: name}})
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	victim, bystander := mint("victim"), mint("bystander")
	gone := make(chan *nats.Conn, 3)
	onGone := nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { gone <- nc })
	// The bystander first: b lists the victim on a later page when pages hold one.
	stays := meshtest.ConnectTo(t, b.ClientURL(), bystander, onGone, nats.NoReconnect())
	onA := meshtest.ConnectTo(t, a.ClientURL(), victim, onGone, nats.NoReconnect())
	onB := meshtest.ConnectTo(t, b.ClientURL(), victim, onGone, nats.NoReconnect())

	// A connection with a plain user JWT is reported with the user's public key.
	n, err := evict(t.Context(), sys, acct.PublicKey(), func(c connz.Conn) bool { return c.User == meshtest.UserKey(t, victim) }, pageSize)
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

// TestCalloutPrincipal: a revoke finds callout connections by the dash form the callout
// mints now and by the dotted form older releases minted; never a static user, another
// actor or owner, or a connection with a JWT of its own that sent such a name.
func TestCalloutPrincipal(t *testing.T) {
	const o = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	anyOwner, mine := CalloutPrincipal("", "alice"), CalloutPrincipal(o, "alice")
	for user, want := range map[string]bool{
		o + "-alice":                         true,
		o + ".alice":                         true,
		o + "-bob":                           false,
		"u_bbbbbbbbbbbbbbbbbbbbbbbbbb-alice": false, // another owner: only anyOwner matches
		"UABC":                               false,
		"alice":                              false,
	} {
		c := connz.Conn{User: user}
		if got := mine(c); got != want {
			t.Errorf("match(%q) = %v, want %v", user, got, want)
		}
		if got := anyOwner(c); got != (want || user == "u_bbbbbbbbbbbbbbbbbbbbbbbbbb-alice") {
			t.Errorf("any-owner match(%q) = %v", user, got)
		}
		// The same name sent by a connection with a user JWT of its own.
		if c.JWT = "eyJhbGciOi.x.y"; mine(c) || anyOwner(c) {
			t.Errorf("a connection with its own JWT and user %q matched", user)
		}
	}
}
