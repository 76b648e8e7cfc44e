package authsvc

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/userauth"
)

// TestGrantNamesThePrincipal: what the lane's authorizer grants a bearer is named
// "<owner>-<actor>", tagged owner:, actor:, principal: (and uid:, profile:), and expires
// with the bearer.
func TestGrantNamesThePrincipal(t *testing.T) {
	f := startLane(t)
	x := f.exchange(t, "alice")
	store := bearer.FileStore{Dir: f.dir}
	issuer, err := bearer.LoadFrom(store, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := bearer.LoadOwnerSecretFrom(store)
	if err != nil {
		t.Fatal(err)
	}
	acl, err := f.Provisioner(testSpace).KeyValue(t.Context(), protocol.BucketACL(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	az := &authorizer{space: testSpace, chain: f.Chain, data: f.ua.DataAccount(), issuer: issuer, kv: f.kv, acl: acl,
		secret: secret, idpIssuer: testIdP, fence: newFence(), recorded: map[string]string{}}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	// A connection without a valid inbox name is refused, as the reference's callout does.
	for _, name := range []string{"", "ibx", "ibx.a.b.c.d", "ibx*0123456789", strings.Repeat("a", 121)} {
		if _, err := az.Authorize(t.Context(), &jwt.AuthorizationRequest{UserNkey: upub,
			ConnectOptions: jwt.ConnectOptions{Token: x.Token, Name: name}}); err == nil || !strings.Contains(err.Error(), "inbox nonce") {
			t.Errorf("name %q: %v, want an inbox nonce refusal", name, err)
		}
	}
	ibx := userauth.NewInboxName()
	g, err := az.Authorize(t.Context(), &jwt.AuthorizationRequest{UserNkey: upub, ConnectOptions: jwt.ConnectOptions{Token: x.Token, Name: ibx}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ibx) != 35 || !g.Permissions.Sub.Allow.Contains("_INBOX_"+ibx+".>") || g.Permissions.Sub.Allow.Contains("_INBOX_"+upub+".>") {
		t.Errorf("sub allow %v: want the named inbox _INBOX_%s.> and not the user key's", g.Permissions.Sub.Allow, ibx)
	}
	principal := x.Owner + ".alice"
	if want := x.Owner + "-alice"; g.Name != want {
		t.Errorf("name %q, want %q", g.Name, want)
	}
	for _, tag := range []string{"owner:" + x.Owner, "actor:alice", "principal:" + principal, "profile:agent"} {
		if !slices.Contains(g.Tags, tag) {
			t.Errorf("tags %v lack %q", g.Tags, tag)
		}
	}
	if !slices.ContainsFunc(g.Tags, func(s string) bool { return strings.HasPrefix(s, "uid:") && len(s) > len("uid:") }) {
		t.Errorf("tags %v lack uid:", g.Tags)
	}
	if want := time.UnixMilli(x.ExpiresAt); g.Expires.Unix() != want.Unix() {
		t.Errorf("expires %s, want the bearer's %s", g.Expires, want)
	}
}

// TestConnectionEndsWithItsBearer: a connection that does not renew its bearer is closed
// by the broker when the bearer expires, since the user JWT the callout minted expires
// with it.
func TestConnectionEndsWithItsBearer(t *testing.T) {
	f := startLane(t)
	first := f.exchange(t, "alice")
	iss, err := bearer.Load(f.dir, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Issue(bearer.Claims{Owner: first.Owner, Actor: "alice", Kind: bearer.KindHuman, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	expired := make(chan error, 4)
	nc, err := f.dialBearer(first.Owner, "alice", tok, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		expired <- err
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	select {
	case err := <-expired:
		if !errors.Is(err, nats.ErrAuthExpired) {
			t.Fatalf("connection error %v, want the authorization expired", err)
		}
	case <-time.After(deadline):
		t.Fatal("the connection outlived its bearer")
	}
}
