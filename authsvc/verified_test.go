package authsvc

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/userauth"
)

// TestVerifiedBearerCache: a bearer that passed verification is remembered and the next
// connect with it skips the signature check, but an expired bearer is never served from
// the cache, a tampered copy of a remembered bearer is verified (and refused), and a
// remembered bearer whose actor was revoked in the ledger is refused.
func TestVerifiedBearerCache(t *testing.T) {
	f := startLane(t)
	x := f.exchange(t, "alice")
	store := bearer.FileStore{Dir: f.dir}
	issuer, err := bearer.LoadFrom(store, testSpace)
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(testclock.Epoch(t).UnixNano())
	issuer.Now = func() time.Time { return time.Unix(0, now.Load()) }
	secret, err := bearer.LoadOwnerSecretFrom(store)
	if err != nil {
		t.Fatal(err)
	}
	acl, err := f.Provisioner(testSpace).KeyValue(t.Context(), protocol.BucketACL(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	verified, err := newVerifiedBearers(issuer)
	if err != nil {
		t.Fatal(err)
	}
	az := &authorizer{space: testSpace, chain: f.Chain, data: f.ua.DataAccount(), issuer: issuer, kv: f.kv, acl: acl,
		secret: secret, idpIssuer: testIdP, fence: newFence(), recorded: map[string]string{}, verified: verified}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	authorize := func(token string) error {
		_, err := az.Authorize(t.Context(), &jwt.AuthorizationRequest{UserNkey: upub,
			ConnectOptions: jwt.ConnectOptions{Token: token, Name: userauth.NewInboxName()}})
		return err
	}
	tok, err := issuer.Issue(bearer.Claims{Owner: x.Owner, Actor: "alice", Kind: bearer.KindHuman, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := authorize(tok); err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
	}
	if verified.len() != 1 {
		t.Fatalf("%d bearers remembered, want 1", verified.len())
	}

	// A copy of the remembered bearer with another signature is a different token: it
	// is verified, and refused.
	forged := tok[:strings.LastIndex(tok, ".")+1] + strings.Repeat("A", len(tok)-strings.LastIndex(tok, ".")-1)
	if err := authorize(forged); err == nil || !strings.Contains(err.Error(), "bearer refused") {
		t.Fatalf("forged copy: %v, want a bearer refusal", err)
	}

	// Past its expiry (and the verifier's leeway) the remembered bearer is refused.
	now.Add(int64(time.Minute + bearer.Leeway + time.Second))
	if err := authorize(tok); err == nil || !strings.Contains(err.Error(), "bearer refused") {
		t.Fatalf("expired bearer: %v, want a bearer refusal", err)
	}
	if verified.len() != 0 {
		t.Fatalf("%d bearers remembered after expiry, want 0", verified.len())
	}

	// A remembered bearer of an actor the ledger no longer grants is refused.
	fresh, err := issuer.Issue(bearer.Claims{Owner: x.Owner, Actor: "alice", Kind: bearer.KindHuman, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := authorize(fresh); err != nil {
		t.Fatalf("fresh bearer: %v", err)
	}
	if _, err := ledger.Revoke(t.Context(), f.kv, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if err := authorize(fresh); err == nil {
		t.Fatal("a remembered bearer of a revoked actor was admitted")
	}
}
