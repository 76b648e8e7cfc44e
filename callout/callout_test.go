package callout

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// keys is a callout's key material: the callout account with a signing key and an xkey,
// and the data account with a signing key.
type keys struct {
	xkey                  nkeys.KeyPair
	xpub                  string
	calloutAcc, calloutSK nkeys.KeyPair
	dataAcc, dataSK       nkeys.KeyPair
}

func newKeys(t testing.TB) keys {
	t.Helper()
	var k keys
	k.xkey, k.xpub = curveKeys(t)
	k.calloutAcc, k.calloutSK = accountKey(t), accountKey(t)
	k.dataAcc, k.dataSK = accountKey(t), accountKey(t)
	return k
}

func accountKey(t testing.TB) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func pub(t testing.TB, kp nkeys.KeyPair) string {
	t.Helper()
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testAuthorizer lets the token "good" publish and subscribe under data.> for a minute.
func testAuthorizer() Authorizer {
	return AuthorizerFunc(func(_ context.Context, req *jwt.AuthorizationRequest) (Grant, error) {
		if req.ConnectOptions.Token == "silent" {
			return Grant{}, fmt.Errorf("%w: the authorizer is fenced", ErrDropped)
		}
		if req.ConnectOptions.Token != "good" {
			return Grant{}, errors.New("bad bearer")
		}
		var p jwt.Permissions
		p.Pub.Allow.Add("data.>")
		p.Sub.Allow.Add("data.>", "_INBOX.>")
		return Grant{Name: "alice", Permissions: p, Tags: jwt.TagList{"actor:Alice"}, Expires: time.Now().Add(time.Minute)}, nil
	})
}

func newResponder(t testing.TB, k keys) *Responder {
	t.Helper()
	r, err := New(Config{
		Authorizer: testAuthorizer(), XKey: k.xkey,
		CalloutAccount: pub(t, k.calloutAcc), CalloutSigner: k.calloutSK,
		DataAccount: pub(t, k.dataAcc), DataSigner: k.dataSK,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fakeServer plays a nats-server: its server nkey signs requests, its xkey seals them.
type fakeServer struct {
	kp         nkeys.KeyPair
	id         string
	xkey       nkeys.KeyPair
	xpub       string
	calloutAcc string
}

func newFakeServer(t testing.TB, calloutAcc string) *fakeServer {
	t.Helper()
	kp, err := nkeys.CreateServer()
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{kp: kp, id: pub(t, kp), calloutAcc: calloutAcc}
	s.xkey, s.xpub = curveKeys(t)
	return s
}

// claims builds a request as the server would for a new user nkey and token.
func (s *fakeServer) claims(t testing.TB, token string) (*jwt.AuthorizationRequestClaims, string) {
	t.Helper()
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.NewAuthorizationRequestClaims(s.calloutAcc)
	c.Audience = Subject
	c.UserNkey = pub(t, u)
	c.Server = jwt.ServerID{Name: "test", ID: s.id, XKey: s.xpub}
	c.ConnectOptions.Token = token
	c.Expires = time.Now().Add(10 * time.Second).Unix()
	return c, c.UserNkey
}

func (s *fakeServer) sign(t testing.TB, c *jwt.AuthorizationRequestClaims, kp nkeys.KeyPair) string {
	t.Helper()
	tok, err := c.Encode(kp)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (s *fakeServer) seal(t testing.TB, token, calloutXPub string) []byte {
	t.Helper()
	out, err := s.xkey.Seal([]byte(token), calloutXPub)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// request returns a well-formed sealed request for token.
func (s *fakeServer) request(t testing.TB, token, calloutXPub string) ([]byte, string) {
	t.Helper()
	c, user := s.claims(t, token)
	return s.seal(t, s.sign(t, c, s.kp), calloutXPub), user
}

// openResponse opens and decodes a sealed response as the server does.
func (s *fakeServer) openResponse(t testing.TB, out []byte, calloutXPub string) *jwt.AuthorizationResponseClaims {
	t.Helper()
	plain, err := s.xkey.Open(out, calloutXPub)
	if err != nil {
		t.Fatalf("open response: %v", err)
	}
	rc, err := jwt.DecodeAuthorizationResponseClaims(string(plain))
	if err != nil {
		t.Fatalf("decode response: %v", err)
	}
	vr := jwt.CreateValidationResults()
	rc.Validate(vr)
	if len(vr.Errors()) > 0 {
		t.Fatalf("response invalid: %v", vr.Errors())
	}
	if rc.Audience != s.id {
		t.Fatalf("response audience %q, want %q", rc.Audience, s.id)
	}
	return rc
}

func TestRespondGrants(t *testing.T) {
	k := newKeys(t)
	r := newResponder(t, k)
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	for i := range 2 {
		body, user := srv.request(t, "good", k.xpub)
		out, err := r.Respond(t.Context(), srv.xpub, body)
		if err != nil {
			t.Fatal(err)
		}
		rc := srv.openResponse(t, out, k.xpub)
		if rc.Subject != user || rc.Error != "" || rc.Issuer != pub(t, k.calloutSK) || rc.IssuerAccount != pub(t, k.calloutAcc) {
			t.Fatalf("response %+v", rc)
		}
		uc, err := jwt.DecodeUserClaims(rc.Jwt)
		if err != nil {
			t.Fatal(err)
		}
		if uc.Subject != user || uc.Issuer != pub(t, k.dataSK) || uc.IssuerAccount != pub(t, k.dataAcc) ||
			uc.Name != "alice" || !uc.Pub.Allow.Contains("data.>") || uc.Expires == 0 || len(uc.Tags) != 1 || uc.Tags[0] != "actor:Alice" {
			t.Fatalf("user claims %+v", uc)
		}
		if r.CachedKeys() != 1 {
			t.Fatalf("request %d: %d cached keys, want 1", i, r.CachedKeys())
		}
	}
}

func TestRespondRefusesWithSignedError(t *testing.T) {
	k := newKeys(t)
	r := newResponder(t, k)
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	body, user := srv.request(t, "bad", k.xpub)
	out, err := r.Respond(t.Context(), srv.xpub, body)
	if err != nil {
		t.Fatal(err)
	}
	rc := srv.openResponse(t, out, k.xpub)
	if rc.Subject != user || rc.Jwt != "" || !strings.Contains(rc.Error, "bad bearer") || rc.Issuer != pub(t, k.calloutSK) {
		t.Fatalf("response %+v", rc)
	}
}

// TestRespondBoundsAuthorize: Config.Timeout (auth-service --auth-timeout) ends an
// Authorize call that takes longer, and the connection is refused with a signed error
// saying so.
func TestRespondBoundsAuthorize(t *testing.T) {
	k := newKeys(t)
	r, err := New(Config{
		Authorizer: AuthorizerFunc(func(ctx context.Context, _ *jwt.AuthorizationRequest) (Grant, error) {
			<-ctx.Done() // a ledger read that never answers
			return Grant{}, ctx.Err()
		}),
		XKey:           k.xkey,
		CalloutAccount: pub(t, k.calloutAcc), CalloutSigner: k.calloutSK,
		DataAccount: pub(t, k.dataAcc), DataSigner: k.dataSK,
		Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	body, _ := srv.request(t, "good", k.xpub)
	ctx, cancel := context.WithTimeout(t.Context(), deadline) // without the bound, Respond would wait this out
	defer cancel()
	out, err := r.Respond(ctx, srv.xpub, body)
	if err != nil {
		t.Fatal(err)
	}
	if rc := srv.openResponse(t, out, k.xpub); rc.Jwt != "" || !strings.Contains(rc.Error, "no decision within the authorization timeout of 50ms") {
		t.Fatalf("response %+v, want a refusal at the deadline", rc)
	}
}

// TestRespondDropsWhatTheAuthorizerDrops: an Authorizer error wrapping ErrDropped gets no
// reply, not a signed refusal.
func TestRespondDropsWhatTheAuthorizerDrops(t *testing.T) {
	k := newKeys(t)
	r := newResponder(t, k)
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	body, _ := srv.request(t, "silent", k.xpub)
	if out, err := r.Respond(t.Context(), srv.xpub, body); !errors.Is(err, ErrDropped) || out != nil {
		t.Fatalf("got reply %d bytes, err %v; want dropped", len(out), err)
	}
}

// TestRespondDrops: every malformed request gets no reply and caches no key.
func TestRespondDrops(t *testing.T) {
	k := newKeys(t)
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	other := newFakeServer(t, pub(t, k.calloutAcc))
	good, _ := srv.request(t, "good", k.xpub)

	unsigned := func() []byte {
		c, _ := srv.claims(t, "good")
		tok := srv.sign(t, c, srv.kp)
		parts := strings.Split(tok, ".")
		other := other.sign(t, c, other.kp) // same claims, another key's signature
		tok = parts[0] + "." + parts[1] + "." + strings.Split(other, ".")[2]
		return srv.seal(t, tok, k.xpub)
	}
	forgedIssuer := func() []byte {
		c, _ := srv.claims(t, "good") // server_id.id names srv, other signs
		return srv.seal(t, srv.sign(t, c, other.kp), k.xpub)
	}
	xkeyMismatch := func() []byte {
		c, _ := srv.claims(t, "good")
		c.Server.XKey = other.xpub // signed xkey is not the sealing one
		return srv.seal(t, srv.sign(t, c, srv.kp), k.xpub)
	}
	notAJWT := func() []byte { return srv.seal(t, "hello", k.xpub) }
	expired := func() []byte {
		c, _ := srv.claims(t, "good")
		c.Expires = time.Now().Add(-time.Minute).Unix()
		return srv.seal(t, srv.sign(t, c, srv.kp), k.xpub)
	}
	otherCallout := func() []byte {
		_, xpub := curveKeys(t)
		body, _ := srv.request(t, "good", xpub)
		return body
	}
	cases := []struct {
		name, hdr string
		body      []byte
	}{
		{"no header", "", good},
		{"garbage header", "XNOTAKEY", good},
		{"garbage body", srv.xpub, []byte("eyJhbGciOi")},
		{"wrong sealing key in header", other.xpub, good},
		{"sealed to another callout", srv.xpub, otherCallout()},
		{"not a jwt", srv.xpub, notAJWT()},
		{"bad signature", srv.xpub, unsigned()},
		{"expired request", srv.xpub, expired()},
		{"issuer is not server_id", srv.xpub, forgedIssuer()},
		{"signed xkey differs from header", srv.xpub, xkeyMismatch()},
	}
	r := newResponder(t, k)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := r.Respond(t.Context(), tc.hdr, tc.body)
			if !errors.Is(err, ErrDropped) || out != nil {
				t.Fatalf("got reply %d bytes, err %v; want dropped", len(out), err)
			}
			if r.CachedKeys() != 0 {
				t.Fatalf("a failed check cached a key (%d)", r.CachedKeys())
			}
		})
	}
	// The same header key then passes once its request is good.
	if _, err := r.Respond(t.Context(), srv.xpub, good); err != nil || r.CachedKeys() != 1 {
		t.Fatalf("good request: %v, cached %d", err, r.CachedKeys())
	}
}

// TestForgedHeadersDoNotGrowCache: 1,000 random server xkeys with garbage bodies leave the
// cache as it was.
func TestForgedHeadersDoNotGrowCache(t *testing.T) {
	k := newKeys(t)
	r := newResponder(t, k)
	srv := newFakeServer(t, pub(t, k.calloutAcc))
	body, _ := srv.request(t, "good", k.xpub)
	if _, err := r.Respond(t.Context(), srv.xpub, body); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		_, forged := curveKeys(t)
		if _, err := r.Respond(t.Context(), forged, body); !errors.Is(err, ErrDropped) {
			t.Fatalf("forged header answered: %v", err)
		}
	}
	if r.CachedKeys() != 1 {
		t.Fatalf("cache holds %d keys, want 1", r.CachedKeys())
	}
}

// TestCacheBound: 65 servers leave 64 keys; the least recently used one goes.
func TestCacheBound(t *testing.T) {
	k := newKeys(t)
	r := newResponder(t, k)
	calloutAcc := pub(t, k.calloutAcc)
	servers := make([]*fakeServer, MaxServerKeys+1)
	ask := func(s *fakeServer) {
		t.Helper()
		body, _ := s.request(t, "good", k.xpub)
		if _, err := r.Respond(t.Context(), s.xpub, body); err != nil {
			t.Fatal(err)
		}
	}
	for i := range servers {
		servers[i] = newFakeServer(t, calloutAcc)
	}
	for _, s := range servers[:MaxServerKeys] {
		ask(s)
	}
	if r.CachedKeys() != MaxServerKeys {
		t.Fatalf("cached %d, want %d", r.CachedKeys(), MaxServerKeys)
	}
	ask(servers[0]) // servers[0] is now the most recent, servers[1] the least
	ask(servers[MaxServerKeys])
	if r.CachedKeys() != MaxServerKeys {
		t.Fatalf("cached %d after 65 servers, want %d", r.CachedKeys(), MaxServerKeys)
	}
	if r.keys.keys.Contains(servers[1].xpub) || !r.keys.keys.Contains(servers[0].xpub) || !r.keys.keys.Contains(servers[MaxServerKeys].xpub) {
		t.Fatal("eviction is not least recently used")
	}
}

func TestNewChecksConfig(t *testing.T) {
	k := newKeys(t)
	good := Config{
		Authorizer: testAuthorizer(), XKey: k.xkey,
		CalloutAccount: pub(t, k.calloutAcc), CalloutSigner: k.calloutSK,
		DataAccount: pub(t, k.dataAcc), DataSigner: k.dataSK,
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	noX := good
	noX.XKey = nil
	wrongX := good
	wrongX.XKey = k.dataSK // not a curve key
	noAuth := good
	noAuth.Authorizer = nil
	badAcc := good
	badAcc.DataAccount = "nope"
	for i, c := range []Config{noX, wrongX, noAuth, badAcc} {
		if _, err := New(c); err == nil {
			t.Fatalf("config %d accepted", i)
		}
	}
}

// BenchmarkRespond runs the whole responder in-process (a sealed request in, a sealed
// response out) with the shared key cached, and with the cache emptied before each
// request so the key is derived per request; it reports the speedup. floor-ns/req is the
// cryptography a cached request cannot skip, timed in the same loop: open the request,
// verify the server's Ed25519 signature, sign two JWTs, seal the response; cached/floor
// is how far the responder is above it.
func BenchmarkRespond(b *testing.B) {
	k := newKeys(b)
	r := newResponder(b, k)
	srv := newFakeServer(b, pub(b, k.calloutAcc))
	c, _ := srv.claims(b, "good")
	token := srv.sign(b, c, srv.kp)
	body := srv.seal(b, token, k.xpub)
	serverKey, err := nkeys.Decode(nkeys.PrefixByteServer, []byte(srv.id))
	if err != nil {
		b.Fatal(err)
	}
	dot := strings.LastIndexByte(token, '.')
	sig, err := base64.RawURLEncoding.DecodeString(token[dot+1:])
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	var cachedDur, derivedDur, floorDur time.Duration
	for b.Loop() {
		t0 := time.Now()
		out, err := r.Respond(ctx, srv.xpub, body)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r.keys.keys.Purge()
		t2 := time.Now()
		if _, err := r.Respond(ctx, srv.xpub, body); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		key, _, err := r.keys.shared(srv.xpub)
		if err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		plain, err := open(key, body)
		if err != nil || !ed25519.Verify(serverKey, plain[:dot], sig) {
			b.Fatalf("floor: request does not open or verify: %v", err)
		}
		_, _ = r.dataSigner.Sign(plain)
		_, _ = r.calloutSigner.Sign(out)
		if _, err := seal(key, out); err != nil {
			b.Fatal(err)
		}
		floorDur += time.Since(t4)
		derivedDur += t3.Sub(t2)
		cachedDur += t1.Sub(t0)
	}
	b.ReportMetric(float64(cachedDur.Nanoseconds())/float64(b.N), "cached-ns/req")
	b.ReportMetric(float64(derivedDur.Nanoseconds())/float64(b.N), "derived-ns/req")
	b.ReportMetric(float64(floorDur.Nanoseconds())/float64(b.N), "floor-ns/req")
	b.ReportMetric(float64(derivedDur)/float64(cachedDur), "speedup")
	b.ReportMetric(float64(cachedDur)/float64(floorDur), "cached/floor")
}

// BenchmarkRespondCached is the cached path of BenchmarkRespond alone, for its ns/op and
// allocs/op: one sealed request answered with the server's shared key cached.
func BenchmarkRespondCached(b *testing.B) {
	k := newKeys(b)
	r := newResponder(b, k)
	srv := newFakeServer(b, pub(b, k.calloutAcc))
	body, _ := srv.request(b, "good", k.xpub)
	ctx := b.Context()
	if _, err := r.Respond(ctx, srv.xpub, body); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Respond(ctx, srv.xpub, body); err != nil {
			b.Fatal(err)
		}
	}
}
