package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/trust/trusttest"
)

// slowIdP is fakeIdP, except that the token "slow" blocks until release is closed,
// ignoring its context, after announcing itself on entered.
type slowIdP struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newSlowIdP() *slowIdP {
	return &slowIdP{entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (s *slowIdP) VerifyIDToken(ctx context.Context, raw string) (string, string, error) {
	if raw == "slow" {
		s.entered <- struct{}{}
		<-s.release
		return "", "", errors.New("too slow")
	}
	return fakeIdP{}.VerifyIDToken(ctx, raw)
}

func (s *slowIdP) free() { s.once.Do(func() { close(s.release) }) }

// startPublic runs an exchange with a public face on an ephemeral port.
func startPublic(t *testing.T, pf PublicFace, lim PublicLimits) (*fixture, *slowIdP) {
	t.Helper()
	idp := newSlowIdP()
	creds := trusttest.SentinelCreds(t)
	f := startWith(t, func(s *Server) {
		s.IdP = idp
		s.Public = &pf
		s.PublicLimits = lim
		s.Discovery = Discovery{Space: "demo", Server: "nats://127.0.0.1:4222", SentinelCreds: creds,
			IdP: exchangewire.BundleIdP{URL: testIdP, Issuer: testIdP, Audience: testIdP}}
	})
	t.Cleanup(idp.free) // runs before the server's cleanup, so Run can drain
	return f, idp
}

// pubDo sends a request to the public face.
func (f *fixture) pubDo(t *testing.T, method, path string, body []byte, hdr map[string]string) reply {
	t.Helper()
	g := *f
	g.base = f.pub
	return g.do(t, method, path, body, hdr)
}

// pubPost sends an exchange to the public face, without a capability, with extra headers.
func (f *fixture) pubPost(t *testing.T, v any, hdr map[string]string) reply {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	return f.pubDo(t, http.MethodPost, "/exchange", b, h)
}

func xff(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }

func TestPublicRoutes(t *testing.T) {
	f, _ := startPublic(t, PublicFace{}, PublicLimits{})
	host, _, err := net.SplitHostPort(f.srv.PublicAddr().String())
	if err != nil || host != "127.0.0.1" || f.srv.PublicURL() != f.pub {
		t.Fatalf("public addr %v, url %q, want 127.0.0.1 and %q", f.srv.PublicAddr(), f.srv.PublicURL(), f.pub)
	}
	if r := f.pubDo(t, http.MethodGet, "/health", nil, nil); r.status != 200 || !bytes.Contains(r.body, []byte(`"urn:cotal:auth:demo"`)) {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
	if r := f.pubDo(t, http.MethodGet, "/jwks", nil, nil); r.status != 200 || r.header.Get("Cache-Control") != "max-age=300" ||
		!bytes.Contains(r.body, []byte(f.srv.Issuer.KeyID())) {
		t.Fatalf("jwks: %d %s", r.status, r.body)
	}
	if r := f.pubDo(t, http.MethodGet, exchangewire.BundlePath, nil, nil); r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("bundle: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/nope", "/", "/exchange/", "/manager-service-authority/x", "/.well-known/cotal-mesh/x"} {
		r := f.pubDo(t, http.MethodGet, path, nil, nil)
		if r.status != 404 || r.errorCode(t) != "not_found" {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		for _, rt := range []string{"GET /.well-known/cotal-mesh", "GET /health", "GET /jwks", "POST /exchange"} {
			if !bytes.Contains(r.body, []byte(rt)) {
				t.Errorf("404 body %s does not list %q", r.body, rt)
			}
		}
	}
	if r := f.pubDo(t, http.MethodGet, "/exchange", nil, nil); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Fatalf("GET /exchange: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	if r := f.pubDo(t, http.MethodPost, exchangewire.BundlePath, nil, nil); r.status != 405 || r.header.Get("Allow") != "GET" {
		t.Fatalf("POST bundle: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	// The loopback face does not serve the bundle.
	if r := f.do(t, http.MethodGet, exchangewire.BundlePath, nil, nil); r.status != 404 {
		t.Fatalf("loopback bundle: %d", r.status)
	}
}

func TestPublicExchangeNeedsNoCap(t *testing.T) {
	f, _ := startPublic(t, PublicFace{}, PublicLimits{})
	human := exchangewire.Request{IDToken: goodIDToken, Actor: "alice"}
	r := f.pubPost(t, human, nil)
	if r.status != 200 {
		t.Fatalf("public human exchange: %d %s", r.status, r.body)
	}
	var res exchangewire.Response
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if c, err := f.srv.Issuer.Verify(res.Token); err != nil || c.Kind != bearer.KindHuman || c.Actor != "alice" {
		t.Fatalf("bearer %+v, %v", c, err)
	}
	// A wrong capability is ignored: the credential is the proof.
	if r := f.pubPost(t, human, map[string]string{"Authorization": "Bearer nope"}); r.status != 200 {
		t.Fatalf("public exchange with a junk Authorization: %d %s", r.status, r.body)
	}
	// The agent grant stays allowed: a still-valid bearer of the space is the proof.
	r = f.pubPost(t, exchangewire.Request{Owner: res.Owner, Actor: "worker", ActorToken: res.Token}, nil)
	if r.status != 200 {
		t.Fatalf("public agent exchange: %d %s", r.status, r.body)
	}
	var agent exchangewire.Response
	if err := json.Unmarshal(r.body, &agent); err != nil {
		t.Fatal(err)
	}
	if c, err := f.srv.Issuer.Verify(agent.Token); err != nil || c.Kind != bearer.KindAgent || c.Actor != "worker" {
		t.Fatalf("agent bearer %+v, %v", c, err)
	}
	// The loopback face still demands the capability.
	b, _ := json.Marshal(human)
	if r := f.do(t, http.MethodPost, "/exchange", b, map[string]string{"Content-Type": "application/json"}); r.status != 401 || r.errorCode(t) != "unauthorized" {
		t.Fatalf("loopback without cap: %d %s", r.status, r.body)
	}
}

func TestPublicRefusals(t *testing.T) {
	f, _ := startPublic(t, PublicFace{}, PublicLimits{})
	human, _ := json.Marshal(exchangewire.Request{IDToken: goodIDToken, Actor: "alice"})
	js := map[string]string{"Content-Type": "application/json"}
	cases := []refusalCase{
		{"origin", human, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.test"}, 403, "origin_refused"},
		{"text", human, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", human, nil, 415, "unsupported_media_type"},
		{"65 KiB", []byte(`{"idToken":"` + strings.Repeat("a", 65<<10) + `"}`), js, 413, "body_too_large"},
		{"not json", []byte(`{`), js, 400, "bad_request"},
		{"ttlSec not a number", []byte(`{"idpToken":"x","actor":"alice","ttlSec":"60"}`), js, 400, "bad_request"},
		{"forged token", []byte(`{"idToken":"forged","actor":"alice"}`), js, 401, "refused"},
	}
	expectRefusals(t, f.pubDo, cases)
}

func TestPublicBundle(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		f, _ := startPublic(t, PublicFace{}, PublicLimits{})
		b, err := exchangewire.FetchBundle(t.Context(), f.pub)
		if err != nil {
			t.Fatalf("FetchBundle: %v", err)
		}
		want := exchangewire.Bundle{Space: "demo", Server: "nats://127.0.0.1:4222", TLSRequired: false,
			UserAuth: exchangewire.UserAuth{Provider: "cotal", IdP: f.srv.Discovery.IdP,
				Endpoints: exchangewire.Endpoints{URL: f.pub, JWKSURL: f.pub + "/jwks"}},
			SentinelCreds: f.srv.Discovery.SentinelCreds}
		if b != want {
			t.Fatalf("bundle\n%+v\nwant\n%+v", b, want)
		}
	})
	t.Run("advertised", func(t *testing.T) {
		f, _ := startPublic(t, PublicFace{URL: "https://mesh.example.com/cotal/", AdvertisedServer: "wss://nats.example.com/ws",
			AgentProvisioningURL: "https://mesh.example.com/provision"}, PublicLimits{})
		if f.srv.PublicURL() != "https://mesh.example.com/cotal" {
			t.Fatalf("public URL %q", f.srv.PublicURL())
		}
		b, err := exchangewire.FetchBundle(t.Context(), f.pub)
		if err != nil {
			t.Fatalf("FetchBundle: %v", err)
		}
		ep := b.UserAuth.Endpoints
		if b.Server != "wss://nats.example.com/ws" || !b.TLSRequired || ep.URL != "https://mesh.example.com/cotal" ||
			ep.JWKSURL != "https://mesh.example.com/cotal/jwks" || ep.AgentProvisioningURL != "https://mesh.example.com/provision" ||
			ep.ManagerAuthorityURL != "" {
			t.Fatalf("bundle %+v", b)
		}
		// The served text is closed: exactly the documented keys.
		r := f.pubDo(t, http.MethodGet, exchangewire.BundlePath, nil, nil)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 5 || m["space"] == nil || m["server"] == nil || m["tlsRequired"] == nil || m["userAuth"] == nil || m["sentinelCreds"] == nil {
			t.Fatalf("bundle keys %s", r.body)
		}
	})
}

func TestPublicThrottlePerPeer(t *testing.T) {
	f, _ := startPublic(t, PublicFace{TrustedProxy: true}, PublicLimits{})
	bad := exchangewire.Request{IDToken: "forged", Actor: "alice"}
	a := xff("203.0.113.9, 10.0.0.1") // peer 10.0.0.1: the hop the proxy appended
	for i := range PublicRefusalLimit {
		if r := f.pubPost(t, bad, a); r.status != 401 {
			t.Fatalf("refusal %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := f.pubPost(t, bad, a)
	if r.status != 429 || r.errorCode(t) != "throttled" {
		t.Fatalf("past the limit: %d %s, want 429", r.status, r.body)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	// A forged first hop does not escape: the last hop is the key.
	if r := f.pubPost(t, bad, xff("198.51.100.7, 10.0.0.1")); r.status != 429 {
		t.Fatalf("forged first hop: %d", r.status)
	}
	// Repeated headers: the last one's last hop counts.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.pub+"/exchange", strings.NewReader(`{"idToken":"forged","actor":"alice"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Forwarded-For", "10.0.0.99")
	req.Header.Add("X-Forwarded-For", "10.0.0.1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 429 {
		t.Fatalf("repeated X-Forwarded-For: %d", res.StatusCode)
	}
	// Another peer is unaffected.
	if r := f.pubPost(t, bad, xff("10.0.0.2")); r.status != 401 {
		t.Fatalf("other peer: %d %s", r.status, r.body)
	}
	// Successes are never throttled.
	if r := f.pubPost(t, exchangewire.Request{IDToken: goodIDToken, Actor: "alice"}, a); r.status != 200 {
		t.Fatalf("success while throttled: %d %s", r.status, r.body)
	}
	// The loopback budget is separate.
	if r := f.post(t, bad); r.status != 401 {
		t.Fatalf("loopback while public throttled: %d %s", r.status, r.body)
	}
	// Rolling: a minute after the first refusals, the peer is heard again.
	f.clock.advance(PublicRefusalWindow)
	if r := f.pubPost(t, bad, a); r.status != 401 {
		t.Fatalf("after the window: %d %s", r.status, r.body)
	}
}

func TestPublicPeerKey(t *testing.T) {
	t.Run("socket without trusted proxy", func(t *testing.T) {
		f, _ := startPublic(t, PublicFace{}, PublicLimits{RefusalLimit: 3})
		bad := exchangewire.Request{IDToken: "forged", Actor: "alice"}
		for i := range 3 {
			if r := f.pubPost(t, bad, xff(fmt.Sprintf("10.0.1.%d", i))); r.status != 401 {
				t.Fatalf("refusal %d: %d", i+1, r.status)
			}
		}
		// X-Forwarded-For is not trusted: every request was the socket's 127.0.0.1.
		if r := f.pubPost(t, bad, xff("10.0.1.200")); r.status != 429 {
			t.Fatalf("new XFF without trusted proxy: %d, want 429", r.status)
		}
	})
	t.Run("trusted proxy without header", func(t *testing.T) {
		f, _ := startPublic(t, PublicFace{TrustedProxy: true}, PublicLimits{RefusalLimit: 3})
		bad := exchangewire.Request{IDToken: "forged", Actor: "alice"}
		for i := range 3 {
			if r := f.pubPost(t, bad, nil); r.status != 401 {
				t.Fatalf("refusal %d: %d", i+1, r.status)
			}
		}
		if r := f.pubPost(t, bad, nil); r.status != 429 {
			t.Fatalf("socket peer past the limit: %d, want 429", r.status)
		}
		if r := f.pubPost(t, bad, xff("10.0.2.1")); r.status != 401 {
			t.Fatalf("forwarded peer: %d, want 401", r.status)
		}
	})
}

func TestForwardedPeer(t *testing.T) {
	cases := []struct {
		xff  []string
		want string
	}{
		{nil, "192.0.2.1"},
		{[]string{"10.0.0.1"}, "10.0.0.1"},
		{[]string{"203.0.113.9, 10.0.0.1"}, "10.0.0.1"},
		{[]string{"203.0.113.9,10.0.0.1 "}, "10.0.0.1"},
		{[]string{"10.0.0.9", "10.0.0.1, 10.0.0.2"}, "10.0.0.2"},
		{[]string{"2001:db8::1"}, "2001:db8::1"},
		{[]string{"::ffff:10.0.0.1"}, "10.0.0.1"},
		{[]string{"10.0.0.1:5555"}, "10.0.0.1"},
		{[]string{"[2001:db8::1]:5555"}, "2001:db8::1"},
		{[]string{"10.0.0.1, "}, "192.0.2.1"},
		{[]string{"unknown"}, "192.0.2.1"},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: "192.0.2.1:4000", Header: http.Header{}}
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := forwardedPeer(r); got != c.want {
			t.Errorf("X-Forwarded-For %q: peer %q, want %q", c.xff, got, c.want)
		}
	}
}

func TestPublicPeerBound(t *testing.T) {
	f, _ := startPublic(t, PublicFace{TrustedProxy: true}, PublicLimits{RefusalLimit: 1})
	bad := exchangewire.Request{IDToken: "forged", Actor: "alice"}
	first := xff("10.9.0.0")
	f.pubPost(t, bad, first)
	if r := f.pubPost(t, bad, first); r.status != 429 {
		t.Fatalf("first peer: %d, want 429", r.status)
	}
	th := f.srv.public.face.throttle
	for i := 1; i <= PublicMaxPeers+100; i++ {
		if r := f.pubPost(t, bad, xff(fmt.Sprintf("10.9.%d.%d", i/256, i%256))); r.status != 401 {
			t.Fatalf("peer %d: %d %s", i, r.status, r.body)
		}
		if n := th.size(); n > PublicMaxPeers {
			t.Fatalf("%d peers tracked, want at most %d", n, PublicMaxPeers)
		}
	}
	if n := th.size(); n != PublicMaxPeers {
		t.Fatalf("%d peers tracked, want %d", n, PublicMaxPeers)
	}
	// The least recently refused peer was evicted: its count starts over.
	if r := f.pubPost(t, bad, first); r.status != 401 {
		t.Fatalf("evicted peer: %d, want 401", r.status)
	}
}

func TestPublicInFlightCap(t *testing.T) {
	f, idp := startPublic(t, PublicFace{}, PublicLimits{})
	statuses := make(chan int, PublicMaxInFlight)
	body, _ := json.Marshal(exchangewire.Request{IDToken: "slow", Actor: "alice"})
	for range PublicMaxInFlight {
		go func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.pub+"/exchange", bytes.NewReader(body))
			if err != nil {
				statuses <- -1
				return
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- -1
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	for i := range PublicMaxInFlight {
		select {
		case <-idp.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d requests in flight", i)
		}
	}
	r := f.pubDo(t, http.MethodGet, "/health", nil, nil)
	if r.status != 503 || r.errorCode(t) != "busy" {
		t.Fatalf("request %d: %d %s, want 503 busy", PublicMaxInFlight+1, r.status, r.body)
	}
	// The loopback face has no such cap.
	if r := f.do(t, http.MethodGet, "/health", nil, nil); r.status != 200 {
		t.Fatalf("loopback while public busy: %d", r.status)
	}
	idp.free()
	for range PublicMaxInFlight {
		select {
		case s := <-statuses:
			if s != 401 && s != 429 { // refusals of one peer: past 30 they are throttled
				t.Fatalf("slow request: %d, want 401 or 429", s)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("slow requests never finished")
		}
	}
	if r := f.pubDo(t, http.MethodGet, "/health", nil, nil); r.status != 200 {
		t.Fatalf("after the slow requests: %d %s", r.status, r.body)
	}
}

func TestPublicDeadline(t *testing.T) {
	f, idp := startPublic(t, PublicFace{}, PublicLimits{Deadline: 100 * time.Millisecond, MaxInFlight: 1})
	r := f.pubPost(t, exchangewire.Request{IDToken: "slow", Actor: "alice"}, nil)
	if r.status != 503 || r.errorCode(t) != "deadline" {
		t.Fatalf("slow request: %d %s, want 503 deadline", r.status, r.body)
	}
	// The handler past its deadline still holds its slot, so slow handlers stay bounded.
	if r := f.pubDo(t, http.MethodGet, "/health", nil, nil); r.status != 503 || r.errorCode(t) != "busy" {
		t.Fatalf("while the slow handler runs: %d %s, want 503 busy", r.status, r.body)
	}
	idp.free()
	meshtest.Until(t, "the slot freed (/health 200)", 10*time.Second, func() bool {
		return f.pubDo(t, http.MethodGet, "/health", nil, nil).status == 200
	})
}

func TestPublicConfigRefused(t *testing.T) {
	iss, err := bearer.Load(t.TempDir(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := bearer.LoadOwnerSecret(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds := trusttest.SentinelCreds(t)
	disc := Discovery{Space: "demo", Server: "nats://127.0.0.1:4222", SentinelCreds: creds,
		IdP: exchangewire.BundleIdP{URL: testIdP, Issuer: testIdP, Audience: testIdP}}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name string
		pf   PublicFace
		edit func(*Discovery)
		msg  string
	}{
		{"bad url", PublicFace{URL: "http://mesh.example.com"}, nil, "exchange-public-url"},
		{"bad advertised", PublicFace{AdvertisedServer: "https://x"}, nil, "advertised-server"},
		{"bad port", PublicFace{Port: 70000}, nil, "exchange-public-port"},
		{"no space", PublicFace{}, func(d *Discovery) { d.Space = "" }, "space"},
		{"no server", PublicFace{}, func(d *Discovery) { d.Server = "" }, "no server to advertise"},
		{"bad server", PublicFace{}, func(d *Discovery) { d.Server = "localhost:4222" }, "server"},
		{"no creds", PublicFace{}, func(d *Discovery) { d.SentinelCreds = "" }, "sentinelCreds"},
		{"no idp", PublicFace{}, func(d *Discovery) { d.IdP = exchangewire.BundleIdP{} }, "idp"},
		{"port taken", PublicFace{Port: takenPort}, nil, "public face"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := disc
			if c.edit != nil {
				c.edit(&d)
			}
			pf := c.pf
			s := &Server{Issuer: iss, Ledger: &fakeLedger{}, OwnerSecret: secret, IdP: fakeIdP{}, Public: &pf, Discovery: d}
			err := s.Run(t.Context(), func(net.Addr) { t.Error("ready called") })
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Run: %v, want an error with %q", err, c.msg)
			}
		})
	}
	// A server advertised in place of --server needs no Discovery.Server.
	d := disc
	d.Server = ""
	s := &Server{Issuer: iss, Ledger: &fakeLedger{}, OwnerSecret: secret, IdP: fakeIdP{},
		Public: &PublicFace{AdvertisedServer: "tls://n.example:4222"}, Discovery: d}
	ctx, cancel := context.WithCancel(t.Context())
	err = s.Run(ctx, func(net.Addr) { cancel() })
	if err != nil {
		t.Fatalf("Run with only an advertised server: %v", err)
	}
}

// TestManagerAuthorityNotServed: the reference's manager-service authority route answers
// 501 with a sentence on both faces (a reference client derives it from the bundle's base
// URL even though the bundle no longer advertises it), whatever the body, and issues nothing.
func TestManagerAuthorityNotServed(t *testing.T) {
	f, _ := startPublic(t, PublicFace{}, PublicLimits{})
	body := []byte(`{"idpToken":"x","request":{"v":1,"kind":"manager-service-authority","operation":"prepare"}}`)
	for name, do := range map[string]func(*testing.T, string, string, []byte, map[string]string) reply{"public": f.pubDo, "loopback": f.do} {
		r := do(t, http.MethodPost, ManagerAuthorityPath, body, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + f.srv.Cap})
		if r.status != http.StatusNotImplemented || r.errorCode(t) != "not_supported" || !bytes.Contains(r.body, []byte("cotal supervise")) {
			t.Fatalf("%s POST %s: %d %s", name, ManagerAuthorityPath, r.status, r.body)
		}
		if r := do(t, http.MethodGet, ManagerAuthorityPath, nil, nil); r.status != 405 || r.header.Get("Allow") != "POST" {
			t.Fatalf("%s GET %s: %d Allow %q", name, ManagerAuthorityPath, r.status, r.header.Get("Allow"))
		}
	}
	b, err := exchangewire.FetchBundle(t.Context(), f.pub)
	if err != nil {
		t.Fatal(err)
	}
	if b.UserAuth.Endpoints.ManagerAuthorityURL != "" {
		t.Fatalf("bundle advertises %q", b.UserAuth.Endpoints.ManagerAuthorityURL)
	}
}
