package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/ledger"
)

const (
	testIdP     = "https://idp.test"
	testSubject = "alice"
	goodIDToken = "good-id-token"
)

// fakeIdP accepts goodIDToken as (testIdP, testSubject) and refuses anything else.
type fakeIdP struct{}

func (fakeIdP) VerifyIDToken(_ context.Context, raw string) (string, string, error) {
	if raw != goodIDToken {
		return "", "", errors.New("signature does not verify")
	}
	return testIdP, testSubject, nil
}

// fakeLedger is an in-memory ledger; err, when set, fails every lookup.
type fakeLedger struct {
	mu   sync.Mutex
	rows map[string]ledger.Row
	err  error
}

func (l *fakeLedger) Lookup(_ context.Context, actor string) (ledger.Row, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return ledger.Row{}, l.err
	}
	r, ok := l.rows[actor]
	if !ok {
		return ledger.Row{}, fmt.Errorf("lookup %s: %w", actor, ledger.ErrNotGranted)
	}
	return r, nil
}

func (l *fakeLedger) revoke(actor string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rows, actor)
}

func (l *fakeLedger) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// fakeClock is a settable clock for the throttle.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a running exchange and what it was built from.
type fixture struct {
	srv    *Server
	base   string // the loopback face
	pub    string // the public face; empty without one
	ledger *fakeLedger
	clock  *fakeClock
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// start runs an exchange on 127.0.0.1:0 until the test ends; Run must return nil.
func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with configure applied to the server before Run.
func startWith(t *testing.T, configure func(*Server)) *fixture {
	t.Helper()
	iss, err := bearer.Load(t.TempDir(), "demo")
	if err != nil {
		t.Fatalf("load issuer: %v", err)
	}
	secret, err := bearer.LoadOwnerSecret(t.TempDir())
	if err != nil {
		t.Fatalf("owner secret: %v", err)
	}
	led := &fakeLedger{rows: map[string]ledger.Row{
		"alice":  {Actor: "alice", Subjects: []string{testSubject}, Scopes: []string{"spawn"}},
		"worker": {Actor: "worker", Subjects: []string{testIdP + "|" + testSubject}, AllowPublish: []string{"work"}, Scopes: []string{"role:builder"}},
		"bob":    {Actor: "bob", Subjects: []string{"bob"}, Scopes: []string{"admin"}},
	}}
	clock := &fakeClock{t: testclock.Epoch(t)}
	s := &Server{Issuer: iss, Ledger: led, OwnerSecret: secret, IdP: fakeIdP{}, IdPIssuer: testIdP, Logger: testLogger(t), Now: clock.Now}
	if configure != nil {
		configure(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(a net.Addr) { addrc <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("exchange never ready")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after close: %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	if len(s.Cap) != 64 {
		t.Fatalf("cap %q, want 64 hex characters", s.Cap)
	}
	f := &fixture{srv: s, base: "http://" + addr.String(), ledger: led, clock: clock}
	if a := s.PublicAddr(); a != nil {
		f.pub = "http://" + a.String()
	}
	return f
}

// reply is a decoded response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	var e exchangewire.ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if e.Error == "" || e.Message != "" {
		t.Errorf("error body %s: want a sentence in error and a code, nothing in message", r.body)
	}
	return e.Code
}

func (f *fixture) do(t *testing.T, method, path string, body []byte, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: res.StatusCode, header: res.Header, body: b}
}

// post sends an exchange with the right cap and content type.
func (f *fixture) post(t *testing.T, v any) reply {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return f.do(t, http.MethodPost, "/exchange", b, map[string]string{
		"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"})
}

func (f *fixture) ok(t *testing.T, v any) exchangewire.Response {
	t.Helper()
	r := f.post(t, v)
	if r.status != http.StatusOK {
		t.Fatalf("exchange %v: %d %s", v, r.status, r.body)
	}
	var res exchangewire.Response
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestHealth(t *testing.T) {
	f := start(t)
	r := f.do(t, http.MethodGet, "/health", nil, nil)
	var h struct {
		OK     bool   `json:"ok"`
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(r.body, &h); err != nil || r.status != 200 || !h.OK || h.Issuer != "urn:cotal:auth:demo" {
		t.Fatalf("health: %d %s (%v)", r.status, r.body, err)
	}
}

func TestJWKS(t *testing.T) {
	f := start(t)
	r := f.do(t, http.MethodGet, "/jwks", nil, nil)
	if r.status != 200 || r.header.Get("Cache-Control") != "max-age=300" {
		t.Fatalf("jwks: %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.body, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0].KeyID != f.srv.Issuer.KeyID() {
		t.Fatalf("jwks keys %+v", set.Keys)
	}
}

func TestUnknownRouteListsRoutes(t *testing.T) {
	f := start(t)
	r := f.do(t, http.MethodGet, "/nope", nil, nil)
	if r.status != 404 || r.errorCode(t) != "not_found" {
		t.Fatalf("404: %d %s", r.status, r.body)
	}
	for _, rt := range []string{"GET /health", "GET /jwks", "POST /exchange"} {
		if !bytes.Contains(r.body, []byte(rt)) {
			t.Errorf("404 body %s does not list %q", r.body, rt)
		}
	}
	r = f.do(t, http.MethodGet, "/exchange", nil, nil)
	if r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Fatalf("GET /exchange: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}

// refusalCase is a POST /exchange a face must refuse, and the refusal it must give.
type refusalCase struct {
	name   string
	body   []byte
	hdr    map[string]string
	status int
	code   string
}

// expectRefusals posts each case with do and checks its status and error code, and that no
// CORS header is set.
func expectRefusals(t *testing.T, do func(t *testing.T, method, path string, body []byte, hdr map[string]string) reply, cases []refusalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, http.MethodPost, "/exchange", c.body, c.hdr)
			if r.status != c.status || r.errorCode(t) != c.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
			if r.header.Get("Access-Control-Allow-Origin") != "" {
				t.Error("CORS header set")
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	f := start(t)
	human, _ := json.Marshal(exchangewire.Request{IDToken: goodIDToken, Actor: "alice"})
	cases := []refusalCase{
		{"no cap", human, map[string]string{"Content-Type": "application/json"}, 401, "unauthorized"},
		{"wrong cap", human, map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64), "Content-Type": "application/json"}, 401, "unauthorized"},
		{"cap not bearer", human, map[string]string{"Authorization": f.srv.Cap, "Content-Type": "application/json"}, 401, "unauthorized"},
		{"origin", human, map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json", "Origin": "http://evil.test"}, 403, "origin_refused"},
		{"text", human, map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", human, map[string]string{"Authorization": "Bearer " + f.srv.Cap}, 415, "unsupported_media_type"},
		{"65 KiB", []byte(`{"idToken":"` + strings.Repeat("a", 65<<10) + `"}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 413, "body_too_large"},
		{"not json", []byte(`{`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json; charset=utf-8"}, 400, "bad_request"},
		{"ttlSec not a number", []byte(`{"idpToken":"x","actor":"alice","ttlSec":"60"}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
		{"view not a string", []byte(`{"idpToken":"x","actor":"alice","view":1}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
		{"both token names", []byte(`{"idpToken":"x","idToken":"x","actor":"alice"}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
		{"no actor", []byte(`{"idpToken":"x"}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
		{"both grants", []byte(`{"idToken":"x","actor":"alice","owner":"u_x","actorToken":"y"}`), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
		{"trailing data", append(append([]byte{}, human...), `{}`...), map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"}, 400, "bad_request"},
	}
	expectRefusals(t, f.do, cases)
}

// TestReferenceWire: the reference's client body ({idpToken, actor} plus ttlSec, view and a
// field this exchange does not know) is accepted; the answer is {token, owner, exp} with exp
// in unix seconds, and ttlSec shortens the bearer.
func TestReferenceWire(t *testing.T) {
	f := start(t)
	r := f.do(t, http.MethodPost, "/exchange", []byte(`{"idpToken":"`+goodIDToken+`","actor":"alice","ttlSec":60.9,"view":"default","future":{"x":1}}`),
		map[string]string{"Authorization": "Bearer " + f.srv.Cap, "Content-Type": "application/json"})
	if r.status != http.StatusOK {
		t.Fatalf("reference body: %d %s", r.status, r.body)
	}
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	tok, _ := got["token"].(string)
	c, err := f.srv.Issuer.Verify(tok)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if exp, ok := got["exp"].(float64); !ok || int64(exp) != c.Expiry.Unix() || got["owner"] != c.Owner || c.TTL != 60*time.Second {
		t.Fatalf("answer %s: want exp = %d (seconds), owner %s, a 60 s bearer (got %s)", r.body, c.Expiry.Unix(), c.Owner, c.TTL)
	}
	// ttlSec above the kind's maximum is capped, never refused.
	res := f.ok(t, map[string]any{"idpToken": goodIDToken, "actor": "alice", "ttlSec": 86400})
	if c, err := f.srv.Issuer.Verify(res.Token); err != nil || c.TTL != bearer.MaxHumanLifetime || res.Expiry() != c.Expiry {
		t.Fatalf("capped ttl: %+v %v", c, err)
	}
}

func TestHumanExchange(t *testing.T) {
	f := start(t)
	res := f.ok(t, exchangewire.Request{IDToken: goodIDToken, Actor: "alice"})
	c, err := f.srv.Issuer.Verify(res.Token)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	owner := f.srv.OwnerSecret.Owner(testIdP, testSubject)
	if c.Owner != owner || res.Owner != owner || c.Actor != "alice" || res.Actor != "alice" || c.Kind != bearer.KindHuman ||
		c.TTL != bearer.MaxHumanLifetime || res.ExpiresAt != c.Expiry.UnixMilli() || res.Exp != c.Expiry.Unix() || len(c.Scope) != 1 || c.Scope[0] != "spawn" {
		t.Fatalf("claims %+v, response %+v", c, res)
	}
	// A qualified subject "<issuer>|<subject>" matches too.
	if res := f.ok(t, exchangewire.Request{IDToken: goodIDToken, Actor: "worker"}); res.Owner != owner {
		t.Fatalf("worker owner %q", res.Owner)
	}
	for _, req := range []exchangewire.Request{
		{IDToken: "forged", Actor: "alice"},       // the IdP refuses
		{IDToken: goodIDToken, Actor: "bob"},      // the row names someone else
		{IDToken: goodIDToken, Actor: "stranger"}, // no row
	} {
		if r := f.post(t, req); r.status != 401 || r.errorCode(t) != "refused" {
			t.Errorf("%+v: %d %s, want 401 refused", req, r.status, r.body)
		}
	}
}

func TestAgentExchange(t *testing.T) {
	f := start(t)
	human := f.ok(t, exchangewire.Request{IDToken: goodIDToken, Actor: "alice"})
	res := f.ok(t, exchangewire.Request{Owner: human.Owner, Actor: "worker", ActorToken: human.Token})
	c, err := f.srv.Issuer.Verify(res.Token)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if c.Owner != human.Owner || c.Actor != "worker" || c.Kind != bearer.KindAgent || c.TTL != bearer.MaxAgentLifetime ||
		len(c.Scope) != 1 || c.Scope[0] != "role:builder" {
		t.Fatalf("claims %+v", c)
	}
	// The agent renews with its own bearer.
	if _, err := f.srv.Issuer.Verify(f.ok(t, exchangewire.Request{Owner: res.Owner, Actor: "worker", ActorToken: res.Token}).Token); err != nil {
		t.Fatal(err)
	}
	other := f.srv.OwnerSecret.Owner(testIdP, "mallory")
	for _, req := range []exchangewire.Request{
		{Owner: other, Actor: "worker", ActorToken: human.Token},             // token of another owner
		{Owner: human.Owner, Actor: "worker", ActorToken: human.Token + "x"}, // bad signature
		{Owner: human.Owner, Actor: "bob", ActorToken: human.Token},          // row names another identity
	} {
		if r := f.post(t, req); r.status != 401 || r.errorCode(t) != "refused" {
			t.Errorf("%+v: %d %s, want 401 refused", req.Actor, r.status, r.body)
		}
	}
	// Revoked: the next exchange is refused.
	f.ledger.revoke("worker")
	if r := f.post(t, exchangewire.Request{Owner: human.Owner, Actor: "worker", ActorToken: human.Token}); r.status != 401 || r.errorCode(t) != "refused" {
		t.Fatalf("revoked: %d %s", r.status, r.body)
	}
	// An unreachable ledger is the exchange's failure, not a refusal.
	f.ledger.fail(errors.New("kv down"))
	if r := f.post(t, exchangewire.Request{IDToken: goodIDToken, Actor: "alice"}); r.status != 503 || r.errorCode(t) != "unavailable" {
		t.Fatalf("ledger down: %d %s", r.status, r.body)
	}
}

func TestThrottle(t *testing.T) {
	f := start(t)
	bad := exchangewire.Request{IDToken: "forged", Actor: "alice"}
	for i := range RefusalLimit {
		if r := f.post(t, bad); r.status != 401 {
			t.Fatalf("refusal %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := f.post(t, bad)
	if r.status != 429 || r.errorCode(t) != "throttled" {
		t.Fatalf("past the limit: %d %s, want 429", r.status, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	// A bad cap is a refusal too, and throttled alike.
	if r := f.do(t, http.MethodPost, "/exchange", nil, nil); r.status != 429 {
		t.Fatalf("bad cap while throttled: %d", r.status)
	}
	// Successes are never throttled.
	f.ok(t, exchangewire.Request{IDToken: goodIDToken, Actor: "alice"})
	// A new window forgives.
	f.clock.advance(RefusalWindow)
	if r := f.post(t, bad); r.status != 401 {
		t.Fatalf("next window: %d %s, want 401", r.status, r.body)
	}
}

func TestThrottlePeerBound(t *testing.T) {
	clock := &fakeClock{t: testclock.Epoch(t)}
	th := newThrottle(2, time.Minute, 4, clock.Now)
	for i := range 3 {
		if _, limited := th.refused("a"); limited != (i == 2) {
			t.Fatalf("refusal %d of a: throttled %v", i+1, limited)
		}
	}
	for i := range 100 {
		clock.advance(time.Millisecond)
		th.refused(fmt.Sprintf("p%d", i))
		if n := th.size(); n > 4 {
			t.Fatalf("%d peers tracked, want at most 4", n)
		}
	}
	// The real bound.
	big := newThrottle(RefusalLimit, RefusalWindow, MaxPeers, clock.Now)
	for i := range 3 * MaxPeers {
		big.refused(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
	}
	if n := big.size(); n != MaxPeers {
		t.Fatalf("%d peers tracked, want %d", n, MaxPeers)
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	iss, err := bearer.Load(t.TempDir(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{":0", "0.0.0.0:0", "localhost:0", "192.0.2.1:0", "[::]:0"} {
		s := &Server{Issuer: iss, Ledger: &fakeLedger{}, OwnerSecret: bearer.OwnerSecret{Key: make([]byte, 32)}, IdP: fakeIdP{}, Addr: addr}
		err := s.Run(t.Context(), func(net.Addr) { t.Errorf("%s: ready called", addr) })
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v, want a loopback refusal", addr, err)
		}
	}
	s := &Server{Issuer: iss, Ledger: &fakeLedger{}, IdP: fakeIdP{}}
	if err := s.Run(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "owner secret") {
		t.Errorf("no owner secret: %v", err)
	}
}

// FuzzDecodeRequest: an exchange body either refuses or is exactly one grant type.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"idToken":"t","actor":"alice"}`))
	f.Add([]byte(`{"owner":"u_aaaaaaaaaaaaaaaaaaaaaaaaaa","actor":"alice","actorToken":"t"}`))
	f.Add([]byte(`{"idToken":"t","actor":"alice","owner":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decode(body)
		if err != nil {
			return
		}
		human := idpToken(req) != ""
		agent := req.ActorToken != "" && req.Owner != ""
		if human == agent {
			t.Fatalf("accepted %q as neither or both grant types: %+v", body, req)
		}
	})
}

// expiringIdP is fakeIdP that also reports the ID token's exp, exp(now).
type expiringIdP struct {
	fakeIdP
	exp func() time.Time
}

func (e expiringIdP) VerifyIDTokenExpiry(ctx context.Context, raw string) (string, string, time.Time, error) {
	iss, sub, err := e.VerifyIDToken(ctx, raw)
	return iss, sub, e.exp(), err
}

// TestHumanBearerCappedToIDToken: as the reference's bridge does, a person's bearer never
// outlives the ID token it rests on, and an ID token past its exp mints nothing.
func TestHumanBearerCappedToIDToken(t *testing.T) {
	var exp time.Time
	f := startWith(t, func(s *Server) { s.IdP = expiringIdP{exp: func() time.Time { return exp }} })
	exp = f.clock.Now().Add(100 * time.Second)
	res := f.ok(t, map[string]any{"idpToken": goodIDToken, "actor": "alice"})
	if c, err := f.srv.Issuer.Verify(res.Token); err != nil || c.TTL != 100*time.Second {
		t.Fatalf("bearer %+v %v: want the ID token's remaining 100 s", c, err)
	}
	res = f.ok(t, map[string]any{"idpToken": goodIDToken, "actor": "alice", "ttlSec": 30})
	if c, err := f.srv.Issuer.Verify(res.Token); err != nil || c.TTL != 30*time.Second {
		t.Fatalf("bearer %+v %v: want ttlSec's 30 s", c, err)
	}
	exp = f.clock.Now()
	r := f.post(t, map[string]any{"idpToken": goodIDToken, "actor": "alice"})
	if r.status != http.StatusUnauthorized || !bytes.Contains(r.body, []byte("IdP session proof has expired")) {
		t.Fatalf("expired ID token: %d %s", r.status, r.body)
	}
}
