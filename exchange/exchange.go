// Package exchange is the loopback token exchange of one user-auth space: an HTTP server on
// 127.0.0.1 that turns an IdP ID token (a human) or a still-valid Cotal bearer (an agent)
// into a fresh Cotal bearer, and publishes the bearer issuer's JWKS.
//
// Routes (a closed, exact-match table; anything else is 404 with the list of routes):
//
//	GET  /health    {"ok":true,"issuer":"urn:cotal:auth:<space>"}
//	GET  /jwks      the issuer's public JWK set, Cache-Control: max-age=300
//	POST /exchange  Authorization: Bearer <cap>; JSON body of at most 64 KiB
//	POST /manager-service-authority  always 501 with a sentence (ManagerAuthorityPath)
//
// POST /exchange refuses any request carrying an Origin header (403: browsers can reach
// loopback but cannot strip Origin), a Content-Type other than application/json (415), a body
// over 64 KiB (413), malformed JSON (400), and a missing or wrong capability (401), in the
// reference's order; unknown fields are ignored. Errors are {"error": "<sentence>", "code":
// "<code>"}. Two disjoint grant types:
//
//	human: {"idpToken": "...", "actor": "..."} (Go's old "idToken" is accepted too)
//	agent: {"owner": "...", "actor": "...", "actorToken": "..."}
//
// A human's ID token is verified by the IdP verifier, the owner is derived with bearer.Owner
// under the space's owner secret, and the actor's ledger row must name the identity (see
// rowHasIdentity): the answer is a human bearer of 900 s. An agent presents a still-valid
// bearer of the owner as actorToken; the actor's ledger row must name an identity deriving to
// that owner: the answer is an agent bearer of 300 s. Both carry the row's scopes.
//
// Refusals are throttled per peer IP: past RefusalLimit refusals in a rolling minute a peer's
// further refusals are answered 429 with Retry-After. Successes are never throttled.
//
// With Server.Public set, Run also serves the public face (see public.go): a second
// listener on 127.0.0.1 for an HTTPS reverse proxy, serving the discovery bundle at
// /.well-known/cotal-mesh and POST /exchange without the capability, under its own
// per-peer throttle, in-flight cap and per-request deadline.
package exchange

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
)

// Limits of the exchange.
const (
	MaxBody         = 64 << 10         // largest accepted request body, bytes
	RefusalLimit    = 30               // refusals per peer per RefusalWindow before 429
	RefusalWindow   = time.Minute      // the throttle's rolling window
	MaxPeers        = 1024             // most peers the throttle tracks at once
	JWKSMaxAge      = 300              // Cache-Control max-age of /jwks, seconds
	shutdownTimeout = 5 * time.Second  // bound on the graceful close
	requestTimeout  = 10 * time.Second // bound on reading one request
)

// Ledger is what the exchange needs of the actor ledger. Lookup returns an error wrapping
// ledger.ErrNotGranted when the actor has no row.
type Ledger interface {
	Lookup(ctx context.Context, actor string) (ledger.Row, error)
}

// IDTokenVerifier checks an IdP ID token (signature, iss, aud, exp) and returns the
// identity it proves.
type IDTokenVerifier interface {
	VerifyIDToken(ctx context.Context, raw string) (issuer, subject string, err error)
}

// ExpiringIDTokenVerifier is an IDTokenVerifier that also returns the token's exp. With
// one, the exchange caps a human bearer to the ID token's remaining life and refuses a
// token already past it, as the reference's bridge does (idp.ts exchange).
type ExpiringIDTokenVerifier interface {
	VerifyIDTokenExpiry(ctx context.Context, raw string) (issuer, subject string, exp time.Time, err error)
}

// Server is the loopback exchange of one space. Set fields before Run.
type Server struct {
	Issuer      *bearer.Issuer     // signs and verifies the space's bearers; required
	Ledger      Ledger             // the actor ledger; required
	OwnerSecret bearer.OwnerSecret // the space's owner secret (bearer.LoadOwnerSecret); required
	IdP         IDTokenVerifier    // verifies human ID tokens; required
	// IdPIssuer is the issuer of bare (unqualified) ledger subjects. Empty means bare subjects
	// match a human of any issuer the IdP verifier accepts, and cannot authorize agents.
	IdPIssuer string
	Cap       string // the per-start capability; empty means Run generates 32 random bytes, hex
	Addr      string // listen address; empty means "127.0.0.1:0". Must be a loopback IP
	// Enroll, when set, is called for every principal about to get a bearer, with its
	// ledger role: it makes the principal's mesh footprint ready (lifecycle uid, bind-only
	// durables) and returns the uid, which the answer carries. An error fails the exchange
	// as unavailable (503), not as a refusal.
	Enroll func(ctx context.Context, p protocol.Principal, role string) (uid string, err error)
	Logger *slog.Logger     // nil means discard
	Now    func() time.Time // clock of the throttles and of the ID token expiry cap; nil means time.Now

	// Public, when set, makes Run serve the public face too; its Port 0 means an ephemeral
	// port. Run checks it with the rules of PublicFace.Check except that Port may be 0.
	Public *PublicFace
	// Discovery is what the public face's discovery bundle says besides its own URLs;
	// required with Public.
	Discovery Discovery
	// PublicLimits bounds the public face; zero fields mean the defaults.
	PublicLimits PublicLimits

	loopback *face
	public   *publicState // nil without Public; set before ready
}

// check validates the configuration without I/O and fills defaults.
func (s *Server) check() error {
	switch {
	case s.Issuer == nil:
		return errors.New("no bearer issuer")
	case s.Ledger == nil:
		return errors.New("no ledger")
	case len(s.OwnerSecret.Key) < bearer.OwnerSecretSize:
		return fmt.Errorf("owner secret is %d bytes, want at least %d", len(s.OwnerSecret.Key), bearer.OwnerSecretSize)
	case s.IdP == nil:
		return errors.New("no IdP verifier")
	}
	if s.Cap == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("generate capability: %w", err)
		}
		s.Cap = hex.EncodeToString(b)
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	s.loopback = &face{name: "loopback", needCap: true, peer: socketPeer,
		throttle: newThrottle(RefusalLimit, RefusalWindow, MaxPeers, now)}
	if s.Public != nil {
		if err := s.checkPublic(now); err != nil {
			return fmt.Errorf("public face: %w", err)
		}
	}
	return nil
}

// listen binds addr, refusing any host that is not a loopback IP literal.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen address %q: the exchange binds only a loopback IP such as 127.0.0.1", addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// Run checks the configuration, binds Addr (and the public face's port when Public is set),
// calls ready with the loopback address once the exchange accepts requests, and serves until
// ctx ends. It returns nil after a clean close (http.Server.Shutdown bounded by 5 s), an
// error when it cannot start or serving fails. Read Cap, PublicAddr and PublicURL after ready.
func (s *Server) Run(ctx context.Context, ready func(net.Addr)) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("exchange: config: %w", err)
	}
	ln, err := listen(ctx, s.Addr)
	if err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	served := []served{{ln, &http.Server{
		Handler:           s.loopbackHandler(),
		ReadHeaderTimeout: requestTimeout,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout,
		MaxHeaderBytes:    MaxBody,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}}}
	if s.public != nil {
		pl, err := s.listenPublic(ctx)
		if err != nil {
			_ = ln.Close() // nothing served yet; the bind error is the one to report
			return fmt.Errorf("exchange: public face: %w", err)
		}
		served = append(served, pl)
	}
	done := make(chan error, len(served))
	for _, l := range served {
		go func() { done <- l.srv.Serve(l.ln) }()
	}
	s.Logger.Info("exchange listening", "addr", ln.Addr().String())
	if s.public != nil {
		s.Logger.Info("exchange public face listening", "addr", s.public.addr.String(), "url", s.public.url)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	var serr error
	running := len(served)
	select {
	case <-ctx.Done():
	case err := <-done:
		running--
		serr = fmt.Errorf("exchange: serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	for _, l := range served {
		if err := l.srv.Shutdown(sctx); err != nil {
			serr = errors.Join(serr, fmt.Errorf("exchange: shutdown %s: %w", l.ln.Addr(), err))
		}
	}
	for range running { // nothing outlives Run
		<-done
	}
	if s.public != nil { // nor a public handler past its deadline
		if err := s.drainPublic(shutdownTimeout); err != nil {
			serr = errors.Join(serr, fmt.Errorf("exchange: %w", err))
		}
	}
	return serr
}

// served is one listener and the HTTP server on it.
type served struct {
	ln  net.Listener
	srv *http.Server
}

// PublicAddr is the public face's bound address, or nil without a public face. Read it after
// Run called ready.
func (s *Server) PublicAddr() net.Addr {
	if s.public == nil {
		return nil
	}
	return s.public.addr
}

// PublicURL is the URL clients reach the public face at: Public.URL, or
// http://127.0.0.1:<bound port>; empty without a public face. Read it after Run called ready.
func (s *Server) PublicURL() string {
	if s.public == nil {
		return ""
	}
	return s.public.url
}

// route is one entry of a closed route table.
type route struct {
	method  string
	path    string
	handler http.HandlerFunc
}

// String is the route as the 404 body lists it, for example "POST /exchange".
func (r route) String() string { return r.method + " " + r.path }

// loopbackHandler is the loopback face's handler; it needs the defaults check fills.
func (s *Server) loopbackHandler() http.Handler {
	return serveRoutes("the exchange", []route{
		{http.MethodGet, "/health", s.health},
		{http.MethodGet, "/jwks", s.jwks},
		{http.MethodPost, "/exchange", s.exchange(s.loopback)},
		{http.MethodPost, ManagerAuthorityPath, managerAuthority},
	})
}

// ManagerAuthorityPath is the reference's route for remote manager services
// (implementations/auth/src/service.ts ROUTES, handleManagerServiceAuthority): a manager
// running away from the mesh host asks it for its credentials. This service does not issue
// them (cotal's manager runs on the mesh host with the project's keys), so the route
// answers 501 with a sentence saying so, and the discovery bundle does not advertise it. A
// reference client that derives the URL from the bundle's base gets that sentence, not a
// bare 404.
const ManagerAuthorityPath = "/manager-service-authority"

// managerAuthorityRefusal is the sentence of every answer on ManagerAuthorityPath.
const managerAuthorityRefusal = "this auth service (cotal) does not serve the remote manager-service authority - " +
	"run the agent manager on the mesh host (cotal supervise), which holds the project's keys"

// managerAuthority answers POST ManagerAuthorityPath: 501, {"error","code":"not_supported"}.
// It reads no body and issues nothing.
func managerAuthority(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotImplemented, "not_supported", managerAuthorityRefusal)
}

// serveRoutes serves a closed, exact-match route table: an unknown path is 404 with the list
// of routes, a known path with the wrong method 405 with Allow.
func serveRoutes(what string, table []route) http.Handler {
	byPath := make(map[string]route, len(table))
	list := make([]string, 0, len(table))
	for _, rt := range table {
		byPath[rt.path] = rt
		list = append(list, rt.String())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := byPath[r.URL.Path]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{
				"error":  fmt.Sprintf("unknown path - %s serves %s", what, strings.Join(list, ", ")),
				"code":   "not_found",
				"routes": list,
			})
			return
		}
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", rt.method+" only")
			return
		}
		rt.handler(w, r)
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "issuer": s.Issuer.Issuer()})
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	b, err := s.Issuer.JWKS()
	if err != nil {
		s.Logger.Error("jwks", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the JWKS is unavailable - see the auth service log")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", JWKSMaxAge))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeJSON writes v as a JSON response with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, exchangewire.ErrorBody{Error: msg, Code: code})
}

// capOK reports whether the request presents the capability, in constant time.
func (s *Server) capOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.Cap)) == 1
}

// socketPeer is the throttle key of a request: the remote IP of its connection.
func socketPeer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
