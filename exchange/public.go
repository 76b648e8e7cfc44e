package exchange

// The public face: a second listener, also on 127.0.0.1, meant to sit behind the operator's
// HTTPS reverse proxy (TLS is never terminated in process). Routes (closed, exact-match;
// anything else is 404 with the list):
//
//	GET  /.well-known/cotal-mesh  the discovery bundle (exchangewire.Bundle)
//	GET  /health                  as on loopback
//	GET  /jwks                    as on loopback
//	POST /exchange                as on loopback, without the capability
//	POST /manager-service-authority  as on loopback: 501, not served (see ManagerAuthorityPath)
//
// POST /exchange needs no capability: the credential in the body is the proof. Both grant
// types stay allowed. A human proves itself with an IdP ID token; an agent with a still-valid
// bearer of this space's issuer (actorToken), which only this space could have signed and
// which the exchange checks against the fresh ledger row, so it is as strong a proof as an ID
// token, and remote agents (managed-agent enrollment, auth.md 4.4) renew through this face.
// The request hygiene is loopback's: an Origin header is refused (403), JSON only (415),
// 64 KiB (413), closed keys (400).
//
// Budgets are the face's own, separate from loopback's: refused exchanges are throttled per
// peer (RefusalLimit in a rolling RefusalWindow, then 429), over at most MaxPeers peers
// (least recently refused evicted); successes are never throttled. At most MaxInFlight
// requests run at once (then 503 "busy"), each under a hard Deadline (then 503
// "deadline"). The peer is the socket's IP or, with PublicFace.TrustedProxy, the last
// X-Forwarded-For hop (the one the proxy appended; earlier hops are the client's to forge).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/exchangewire"
)

// Defaults of PublicLimits.
const (
	PublicRefusalLimit  = 30               // refused exchanges per peer per window before 429
	PublicRefusalWindow = time.Minute      // the rolling window of refusals
	PublicMaxPeers      = 1024             // peers the public throttle tracks at once
	PublicMaxInFlight   = 64               // concurrent public requests before 503 busy
	PublicDeadline      = 10 * time.Second // hard deadline of one public request
)

// PublicLimits bounds the public face. Zero fields mean the defaults above; tests shrink them.
type PublicLimits struct {
	RefusalLimit  int           // refused exchanges per peer per RefusalWindow; 0 means 30
	RefusalWindow time.Duration // 0 means a minute
	MaxPeers      int           // peers the throttle tracks; 0 means 1024
	MaxInFlight   int           // concurrent requests before 503; 0 means 64
	Deadline      time.Duration // per request, from the handler's start; 0 means 10 s
}

// withDefaults fills zero fields.
func (l PublicLimits) withDefaults() PublicLimits {
	if l.RefusalLimit <= 0 {
		l.RefusalLimit = PublicRefusalLimit
	}
	if l.RefusalWindow <= 0 {
		l.RefusalWindow = PublicRefusalWindow
	}
	if l.MaxPeers <= 0 {
		l.MaxPeers = PublicMaxPeers
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = PublicMaxInFlight
	}
	if l.Deadline <= 0 {
		l.Deadline = PublicDeadline
	}
	return l
}

// Discovery is what the discovery bundle says besides the public face's own URLs.
type Discovery struct {
	Space string // the space; required
	// Server is the broker URL of the auth service (--server), advertised unless
	// PublicFace.AdvertisedServer is set; then it may be empty.
	Server        string
	IdP           exchangewire.BundleIdP // the space's pinned IdP; required
	SentinelCreds string                 // the deny-all sentinel creds file text; required
}

// publicState is the public face of a running Server.
type publicState struct {
	face   *face
	limits PublicLimits
	slots  chan struct{} // in-flight requests, held until their handler really ends
	addr   net.Addr      // bound address; set before ready
	url    string        // public URL; set before ready
	bundle []byte        // the encoded exchangewire.Bundle; set before ready
}

// checkPublic validates the public-face configuration without I/O and prepares its state.
func (s *Server) checkPublic(now func() time.Time) error {
	if err := s.Public.checkValues(); err != nil {
		return err
	}
	if s.Public.AdvertisedServer == "" && s.Discovery.Server == "" {
		return errors.New("no server to advertise: set Discovery.Server or PublicFace.AdvertisedServer")
	}
	b := s.bundle("http://127.0.0.1") // the real URL is known after bind
	if err := b.Validate(); err != nil {
		return fmt.Errorf("discovery bundle: %w", err)
	}
	lim := s.PublicLimits.withDefaults()
	peer := socketPeer
	if s.Public.TrustedProxy {
		peer = forwardedPeer
	}
	s.public = &publicState{
		face: &face{name: "public", peer: peer,
			throttle: newThrottle(lim.RefusalLimit, lim.RefusalWindow, lim.MaxPeers, now)},
		limits: lim,
		slots:  make(chan struct{}, lim.MaxInFlight),
	}
	return nil
}

// bundle composes the discovery bundle for the public URL base.
func (s *Server) bundle(base string) exchangewire.Bundle {
	server := s.Discovery.Server
	if s.Public.AdvertisedServer != "" {
		server = s.Public.AdvertisedServer
	}
	tls := false
	if u, err := url.Parse(server); err == nil {
		tls = exchangewire.TLSScheme(u.Scheme)
	}
	return exchangewire.Bundle{
		Space:       s.Discovery.Space,
		Server:      server,
		TLSRequired: tls,
		UserAuth: exchangewire.UserAuth{
			Provider: exchangewire.BundleProvider,
			IdP:      s.Discovery.IdP,
			Endpoints: exchangewire.Endpoints{
				URL: base,
				// No ManagerAuthorityURL: this service does not serve the reference's
				// remote manager authority (ManagerAuthorityPath answers 501).
				AgentProvisioningURL: s.Public.AgentProvisioningURL,
				JWKSURL:              base + "/jwks",
			},
		},
		SentinelCreds: s.Discovery.SentinelCreds,
	}
}

// listenPublic binds the public face, fixes its URL and bundle, and builds its HTTP server.
func (s *Server) listenPublic(ctx context.Context) (served, error) {
	p := s.public
	ln, err := listen(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Public.Port)))
	if err != nil {
		return served{}, err
	}
	p.addr = ln.Addr()
	p.url = strings.TrimSuffix(s.Public.URL, "/")
	if p.url == "" {
		p.url = "http://" + p.addr.String()
	}
	p.bundle, err = json.Marshal(s.bundle(p.url))
	if err != nil {
		_ = ln.Close() // the encoding error is the one to report
		return served{}, fmt.Errorf("encode discovery bundle: %w", err)
	}
	h := serveRoutes("the public face", []route{
		{http.MethodGet, exchangewire.BundlePath, s.serveBundle},
		{http.MethodGet, "/health", s.health},
		{http.MethodGet, "/jwks", s.jwks},
		{http.MethodPost, "/exchange", s.exchange(p.face)},
		{http.MethodPost, ManagerAuthorityPath, managerAuthority},
	})
	d := p.limits.Deadline
	return served{ln, &http.Server{
		Handler:           s.admit(h),
		ReadHeaderTimeout: d,
		ReadTimeout:       d,
		WriteTimeout:      2 * d, // room to write the 503 of a request that hit its deadline
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    MaxBody,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}}, nil
}

// serveBundle serves GET /.well-known/cotal-mesh.
func (s *Server) serveBundle(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.public.bundle)
}

// drainPublic waits until every public handler, including those past their deadline, has
// returned, for at most wait.
func (s *Server) drainPublic(wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	for range cap(s.public.slots) {
		select {
		case s.public.slots <- struct{}{}:
		case <-t.C:
			return errors.New("public handlers still running past their deadline")
		}
	}
	return nil
}

// admit runs next under the public face's in-flight cap and deadline. A request beyond
// MaxInFlight is answered 503 busy; one still running at its Deadline is answered 503
// deadline while its handler, whose context is then cancelled, keeps its slot until it
// returns, so slow handlers can never number more than MaxInFlight.
func (s *Server) admit(next http.Handler) http.Handler {
	p := s.public
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.slots <- struct{}{}:
		default:
			s.Logger.Warn("public face busy", "peer", p.face.peer(r), "path", r.URL.Path)
			writeError(w, http.StatusServiceUnavailable, "busy", "busy - retry shortly")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), p.limits.Deadline)
		defer cancel()
		bw := &bufferedWriter{header: make(http.Header)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { <-p.slots }() // before done: a finished request frees its slot first
			defer func() {
				if v := recover(); v != nil {
					s.Logger.Error("public handler panicked", "path", r.URL.Path, "panic", v)
					bw.reset(http.StatusInternalServerError)
				}
			}()
			next.ServeHTTP(bw, r.WithContext(ctx))
		}()
		select {
		case <-done:
			bw.copyTo(w)
		case <-ctx.Done():
			if r.Context().Err() != nil { // the client left; nobody reads an answer
				return
			}
			s.Logger.Warn("public request past its deadline", "peer", p.face.peer(r), "path", r.URL.Path)
			writeError(w, http.StatusServiceUnavailable, "deadline", "request deadline exceeded")
		}
	})
}

// bufferedWriter holds a response until the handler is done, so admit can send either it or
// the deadline's 503, never a mix.
type bufferedWriter struct {
	header http.Header
	status int
	body   []byte
	failed bool // the handler panicked: send a bare 500
}

// Header is the held response's header.
func (b *bufferedWriter) Header() http.Header { return b.header }

// WriteHeader holds the first status.
func (b *bufferedWriter) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// Write holds p.
func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.body = append(b.body, p...)
	return len(p), nil
}

// reset drops what was written, to answer status instead.
func (b *bufferedWriter) reset(status int) {
	b.header, b.status, b.body, b.failed = make(http.Header), status, nil, true
}

// copyTo sends the held response.
func (b *bufferedWriter) copyTo(w http.ResponseWriter) {
	if b.failed {
		writeError(w, b.status, "internal", "the exchange failed - see the auth service log")
		return
	}
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body)
}

// forwardedPeer is the throttle key behind a trusted proxy: the IP of the last
// X-Forwarded-For hop, the one the proxy appended. A request without the header, or whose
// last hop is not an IP (optionally with a port), is keyed on its socket address.
func forwardedPeer(r *http.Request) string {
	vals := r.Header.Values("X-Forwarded-For")
	if len(vals) == 0 {
		return socketPeer(r)
	}
	last := vals[len(vals)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	last = strings.TrimSpace(last)
	if ip, err := netip.ParseAddr(last); err == nil {
		return ip.WithZone("").Unmap().String()
	}
	if ap, err := netip.ParseAddrPort(last); err == nil {
		return ap.Addr().WithZone("").Unmap().String()
	}
	return socketPeer(r)
}
