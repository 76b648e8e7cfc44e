package delivery

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// issuer mints member credentials of one account for the verifier tests.
type issuer struct {
	t       *testing.T
	account nkeys.KeyPair
	pub     string
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{t: t, account: kp, pub: pub}
}

// cred is one minted member credential: its token and its user key.
type cred struct {
	token string
	user  nkeys.KeyPair
	p     protocol.Principal
	uid   string
}

// mint issues a credential of p valid from iat until exp (unix seconds; 0 means none).
func (is *issuer) mint(p protocol.Principal, iat, exp int64) cred {
	is.t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		is.t.Fatal(err)
	}
	upub, _ := user.PublicKey()
	uid := protocol.NewLifecycleUID()
	uc := jwt.NewUserClaims(upub)
	uc.IssuedAt, uc.Expires = iat, exp
	uc.Tags.Add("owner:"+p.Owner, "actor:"+p.Actor, "uid:"+uid)
	uc.Permissions.Sub.Allow.Add("cotal.sp.chat.general")
	token, err := uc.Encode(is.account)
	if err != nil {
		is.t.Fatal(err)
	}
	return cred{token: token, user: user, p: p, uid: uid}
}

// request signs body on the principal's rail subject with c's user key.
func (c cred) request(t *testing.T, signer nkeys.KeyPair, body string) (subject, sig string) {
	t.Helper()
	subject = protocol.Root + ".sp.ctl." + protocol.ServiceDelivery + "." + c.p.String()
	raw, err := signer.Sign(protocol.SignedBytes(subject, []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	return subject, base64.RawURLEncoding.EncodeToString(raw)
}

// present verifies c on a request of its own principal, signed by signer, at now, and
// remembers it when it passes (as the ctl rail does once the ACL row is committed).
func (v *verifier) present(t *testing.T, c cred, p protocol.Principal, signer nkeys.KeyPair, now time.Time) (member, error) {
	t.Helper()
	subject, sig := c.request(t, signer, `{"op":"confirmPosition"}`)
	mem, cl, err := v.verify("sp", c.token, sig, subject, []byte(`{"op":"confirmPosition"}`), p, now)
	if err == nil {
		v.remember(cl, now)
	}
	return mem, err
}

func testVerifier(is *issuer, size int) *verifier {
	return &verifier{account: is.pub, issuers: []string{is.pub}, cache: newClaimsCache(size)}
}

var (
	alice = protocol.Principal{Owner: "ann", Actor: "alice"}
	bob   = protocol.Principal{Owner: "ann", Actor: "bob"}
)

// TestClaimsCacheExpiry: a remembered credential is served from the cache while valid
// and refused, and forgotten, from its expiry on (the clock is the caller's).
func TestClaimsCacheExpiry(t *testing.T) {
	is := newIssuer(t)
	v := testVerifier(is, 16)
	t0 := time.Unix(1_900_000_000, 0)
	c := is.mint(alice, t0.Unix()-10, t0.Unix()+60)

	mem, err := v.present(t, c, alice, c.user, t0)
	if err != nil || mem.uid != c.uid {
		t.Fatalf("first request: %v, %v", mem, err)
	}
	if _, ok := v.cache.get(c.token, t0.Unix()); !ok {
		t.Fatal("a credential that passed every check was not remembered")
	}
	if _, err := v.present(t, c, alice, c.user, t0.Add(59*time.Second)); err != nil {
		t.Fatalf("served from the cache before its expiry: %v", err)
	}
	_, err = v.present(t, c, alice, c.user, t0.Add(60*time.Second))
	if !errors.Is(err, errCredential) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("at its expiry: %v, want an expired credential refused", err)
	}
	if n := v.cache.len(); n != 0 {
		t.Fatalf("an expired credential is still cached (%d entries)", n)
	}
}

// TestClaimsCacheHitChecksRequest: a remembered credential is still refused for another
// requester or a request its user key did not sign.
func TestClaimsCacheHitChecksRequest(t *testing.T) {
	is := newIssuer(t)
	v := testVerifier(is, 16)
	now := time.Unix(1_900_000_000, 0)
	c := is.mint(alice, now.Unix(), 0)
	if _, err := v.present(t, c, alice, c.user, now); err != nil {
		t.Fatal(err)
	}
	other, _ := nkeys.CreateUser()
	if _, err := v.present(t, c, alice, other, now); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("cached credential, foreign signature: %v, want refused", err)
	}
	if _, err := v.present(t, c, bob, c.user, now); err == nil || !strings.Contains(err.Error(), "not the requester") {
		t.Fatalf("cached credential, another requester: %v, want refused", err)
	}
}

// TestClaimsCacheNeverServesAnother: a token is served only its own claims, even when
// another's entry sits where its hash points.
func TestClaimsCacheNeverServesAnother(t *testing.T) {
	is := newIssuer(t)
	v := testVerifier(is, 16)
	now := time.Unix(1_900_000_000, 0)
	a, b := is.mint(alice, now.Unix(), 0), is.mint(bob, now.Unix(), 0)
	if _, err := v.present(t, a, alice, a.user, now); err != nil {
		t.Fatal(err)
	}
	mem, err := v.present(t, b, bob, b.user, now)
	if err != nil || mem.p != bob || mem.uid != b.uid {
		t.Fatalf("bob after alice was cached: %v, %v", mem, err)
	}
	// Alice's claims planted under bob's token's key: bob's token is not served them.
	aliceClaims, ok := v.cache.get(a.token, now.Unix())
	if !ok {
		t.Fatal("alice not cached")
	}
	planted := newClaimsCache(16)
	planted.byID[sha(b.token)] = aliceClaims
	if cl, ok := planted.get(b.token, now.Unix()); ok {
		t.Fatalf("bob's token was served %s's claims", cl.principal)
	}
	// A token that is not a credential of the space is refused, cached or not.
	foreign := newIssuer(t).mint(alice, now.Unix(), 0)
	if _, err := v.present(t, foreign, alice, foreign.user, now); err == nil {
		t.Fatal("a credential of another account was accepted")
	}
}

// TestClaimsCacheBounded: the cache never holds more than its size; entries no longer
// valid go first.
func TestClaimsCacheBounded(t *testing.T) {
	is := newIssuer(t)
	v := testVerifier(is, 4)
	now := time.Unix(1_900_000_000, 0)
	short := is.mint(alice, now.Unix(), now.Unix()+10)
	if _, err := v.present(t, short, alice, short.user, now); err != nil {
		t.Fatal(err)
	}
	var kept []cred
	for range 3 {
		c := is.mint(bob, now.Unix(), 0)
		if _, err := v.present(t, c, bob, c.user, now); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, c)
	}
	later := now.Add(time.Minute) // short has expired
	c := is.mint(bob, now.Unix(), 0)
	if _, err := v.present(t, c, bob, c.user, later); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(kept, c) {
		if _, ok := v.cache.get(k.token, later.Unix()); !ok {
			t.Fatal("a valid entry was evicted while an expired one could go")
		}
	}
	for range 20 {
		c := is.mint(bob, now.Unix(), 0)
		if _, err := v.present(t, c, bob, c.user, later); err != nil {
			t.Fatal(err)
		}
		if n := v.cache.len(); n > 4 {
			t.Fatalf("cache holds %d entries, bound 4", n)
		}
	}
}

func sha(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }
