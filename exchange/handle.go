package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
)

// idpToken is the human's ID token under either of its names.
func idpToken(r exchangewire.Request) string {
	if r.IDPToken != "" {
		return r.IDPToken
	}
	return r.IDToken
}

// refusal is a refused exchange: the status, code and message the client sees, and the
// detail only the log sees.
type refusal struct {
	status int
	code   string
	msg    string
	detail error
}

func (r *refusal) Error() string { return fmt.Sprintf("%s: %s: %v", r.code, r.msg, r.detail) }

func refuse(status int, code, msg string, detail error) *refusal {
	return &refusal{status: status, code: code, msg: msg, detail: detail}
}

// errUnavailable marks a failure of the exchange itself (the ledger is unreachable): not the
// client's fault, so not throttled.
var errUnavailable = errors.New("exchange unavailable")

// face is one listener's view of POST /exchange: whether it needs the capability, its
// refusal throttle, and how it names a request's peer.
type face struct {
	name     string // "loopback" or "public", for the log
	needCap  bool
	throttle *throttle
	peer     func(*http.Request) string
}

// exchange serves POST /exchange on face f.
func (s *Server) exchange(f *face) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.exchangeOn(f, w, r) }
}

// exchangeOn answers one exchange on face f: the bearer, or the refusal (throttled per peer).
func (s *Server) exchangeOn(f *face, w http.ResponseWriter, r *http.Request) {
	resp, err := s.serveExchange(r, f.needCap)
	if err == nil {
		s.Logger.Info("exchanged", "face", f.name, "owner", resp.Owner, "actor", resp.Actor)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	if errors.Is(err, errUnavailable) {
		s.Logger.Error("exchange failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the exchange cannot reach the ledger - retry shortly and see the auth service log")
		return
	}
	rf, ok := errors.AsType[*refusal](err)
	if !ok { // the exchange's own failure: not the client's, so not throttled
		s.Logger.Error("exchange failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the exchange failed - see the auth service log")
		return
	}
	p := f.peer(r)
	if retry, throttled := f.throttle.refused(p); throttled {
		s.Logger.Warn("exchange throttled", "face", f.name, "peer", p, "code", rf.code)
		w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "throttled", "too many refused exchanges - wait a minute and retry")
		return
	}
	s.Logger.Warn("exchange refused", "face", f.name, "peer", p, "code", rf.code, "err", rf.detail)
	if rf.status == http.StatusUnauthorized && rf.code == "unauthorized" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cotal-exchange"`)
	}
	writeError(w, rf.status, rf.code, rf.msg)
}

// serveExchange checks the request hygiene in the reference's order (Origin, content type,
// then, with needCap, the capability), then the body, then runs the grant. The method is
// checked by the route table.
func (s *Server) serveExchange(r *http.Request, needCap bool) (exchangewire.Response, error) {
	if r.Header.Get("Origin") != "" {
		return exchangewire.Response{}, refuse(http.StatusForbidden, "origin_refused",
			"browser-origin requests are not served here", nil)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return exchangewire.Response{}, refuse(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"content-type must be application/json", err)
	}
	if needCap && !s.capOK(r) {
		return exchangewire.Response{}, refuse(http.StatusUnauthorized, "unauthorized",
			"missing/invalid exchange capability - read it from the space's auth-service.json", nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return exchangewire.Response{}, refuse(http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request body too large (maximum %d bytes)", MaxBody), err)
		}
		return exchangewire.Response{}, refuse(http.StatusBadRequest, "bad_request", "request body could not be read", err)
	}
	req, ttl, err := decode(body)
	if err != nil {
		return exchangewire.Response{}, refuse(http.StatusBadRequest, "bad_request", err.Error(), err)
	}
	if idpToken(req) != "" {
		return s.human(r.Context(), req, ttl)
	}
	return s.agent(r.Context(), req, ttl)
}

// Refusal sentences of decode, the reference's where it has one.
const (
	humanShape = "exchange needs { idpToken: string, actor: string, ttlSec?: number, view?: string }"
	agentShape = "agent exchange needs { owner: string, actor: string, actorToken: string, ttlSec?: number }"
)

// decode parses one JSON object the way the reference's exchange does: unknown fields are
// ignored, the known ones type-checked, and the grant type decided. It returns the
// requested lifetime, 0 when the request names none.
func decode(body []byte) (exchangewire.Request, time.Duration, error) {
	if !json.Valid(body) {
		return exchangewire.Request{}, 0, errors.New("request body is not valid JSON")
	}
	var req exchangewire.Request
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return exchangewire.Request{}, 0, fmt.Errorf("request field %s must be a %s", te.Field, jsonKind(te.Field))
		}
		return exchangewire.Request{}, 0, errors.New("request body must be a JSON object")
	}
	var ttl time.Duration
	if req.TTLSec != nil {
		sec := math.Floor(*req.TTLSec)
		if math.IsNaN(sec) || sec < 1 {
			return exchangewire.Request{}, 0, errors.New("ttlSec must be a number of seconds, at least 1")
		}
		ttl = time.Duration(min(sec, math.MaxInt32)) * time.Second
	}
	if req.ManagerInstanceID != nil && (req.View == nil || *req.View != "manager-caller") {
		return exchangewire.Request{}, 0, errors.New(`managerInstanceId is only valid with view "manager-caller"`)
	}
	human := req.IDPToken != "" || req.IDToken != ""
	agent := req.ActorToken != ""
	switch {
	case req.IDPToken != "" && req.IDToken != "":
		return exchangewire.Request{}, 0, errors.New("send idpToken only (idToken is its old name), not both")
	case human && agent:
		return exchangewire.Request{}, 0, errors.New("exchange takes idpToken (human) OR owner+actorToken (agent), never both")
	case agent && (req.Owner == "" || req.Actor == ""):
		return exchangewire.Request{}, 0, errors.New(agentShape)
	case !human && !agent:
		if req.Owner != "" {
			return exchangewire.Request{}, 0, errors.New(agentShape)
		}
		return exchangewire.Request{}, 0, errors.New(humanShape)
	case human && req.Actor == "":
		return exchangewire.Request{}, 0, errors.New(humanShape)
	case !protocol.ValidActor(req.Actor):
		return exchangewire.Request{}, 0, fmt.Errorf("actor %q: use 1 to %d letters, digits and _", req.Actor, protocol.MaxActorLength)
	}
	return req, ttl, nil
}

// jsonKind is the JSON type a known request field takes, for a type refusal.
func jsonKind(field string) string {
	if field == "ttlSec" {
		return "number"
	}
	return "string"
}

// lifetime is the bearer lifetime of a request for ttl (0: none named) of a kind whose
// maximum is max.
func lifetime(ttl, max time.Duration) time.Duration {
	if ttl == 0 || ttl > max {
		return max
	}
	return ttl
}

// notGranted is the one refusal for every ledger mismatch, so a client cannot tell a missing
// row from a row that names someone else.
func notGranted(actor string, detail error) *refusal {
	return refuse(http.StatusUnauthorized, "refused",
		fmt.Sprintf("this identity is not granted actor %q; ask the space admin to run cotal actor grant", actor), detail)
}

// row looks the actor up, mapping a missing row to a refusal and other failures to
// errUnavailable.
func (s *Server) row(ctx context.Context, actor string) (ledger.Row, error) {
	row, err := s.Ledger.Lookup(ctx, actor)
	switch {
	case errors.Is(err, ledger.ErrNotGranted):
		return ledger.Row{}, notGranted(actor, err)
	case err != nil:
		return ledger.Row{}, fmt.Errorf("%w: ledger lookup %q: %w", errUnavailable, actor, err)
	}
	return row, nil
}

// human exchanges an IdP ID token for a human bearer.
func (s *Server) human(ctx context.Context, req exchangewire.Request, ttl time.Duration) (exchangewire.Response, error) {
	var iss, sub string
	var exp time.Time
	var err error
	ev, capped := s.IdP.(ExpiringIDTokenVerifier)
	if capped {
		iss, sub, exp, err = ev.VerifyIDTokenExpiry(ctx, idpToken(req))
	} else {
		iss, sub, err = s.IdP.VerifyIDToken(ctx, idpToken(req))
	}
	if err != nil {
		return exchangewire.Response{}, refuse(http.StatusUnauthorized, "refused",
			"the ID token was not accepted (expired, wrong issuer or audience, or bad signature); log in again", err)
	}
	ttl = lifetime(ttl, bearer.MaxHumanLifetime)
	if capped {
		// The bearer never outlives the IdP proof it rests on (whole seconds, as the reference).
		left := time.Duration(exp.Unix()-s.clock().Unix()) * time.Second
		if left <= 0 {
			return exchangewire.Response{}, refuse(http.StatusUnauthorized, "refused",
				"the IdP session proof has expired - cannot mint a bearer; log in again", fmt.Errorf("id token exp %s", exp))
		}
		ttl = min(ttl, left)
	}
	row, err := s.row(ctx, req.Actor)
	if err != nil {
		return exchangewire.Response{}, err
	}
	if !s.rowHasIdentity(row, iss, sub) {
		return exchangewire.Response{}, notGranted(req.Actor, fmt.Errorf("no subject of the row matches %q", sub))
	}
	return s.issue(ctx, row, bearer.Claims{Owner: s.OwnerSecret.Owner(iss, sub), Actor: req.Actor, Kind: bearer.KindHuman, Scope: row.Scopes, TTL: ttl})
}

// clock is the server's clock (Now, else time.Now).
func (s *Server) clock() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// agent exchanges a still-valid bearer of req.Owner for a short agent bearer.
func (s *Server) agent(ctx context.Context, req exchangewire.Request, ttl time.Duration) (exchangewire.Response, error) {
	c, err := s.Issuer.Verify(req.ActorToken)
	if err != nil {
		return exchangewire.Response{}, refuse(http.StatusUnauthorized, "refused",
			"the actor token is not a valid bearer of this space (expired, or from another space); get a fresh one", err)
	}
	if c.Owner != req.Owner {
		return exchangewire.Response{}, refuse(http.StatusUnauthorized, "refused",
			"the actor token belongs to another owner", fmt.Errorf("token owner %q, asked %q", c.Owner, req.Owner))
	}
	row, err := s.row(ctx, req.Actor)
	if err != nil {
		return exchangewire.Response{}, err
	}
	if !row.HasOwner(s.OwnerSecret, s.IdPIssuer, req.Owner) {
		return exchangewire.Response{}, notGranted(req.Actor, fmt.Errorf("no subject of the row derives to owner %q", req.Owner))
	}
	return s.issue(ctx, row, bearer.Claims{Owner: req.Owner, Actor: req.Actor, Kind: bearer.KindAgent, Scope: row.Scopes, TTL: lifetime(ttl, bearer.MaxAgentLifetime)})
}

// issue enrolls the principal (when the server enrolls), signs the bearer, which carries
// the enrolled lifecycle uid, and builds the response.
func (s *Server) issue(ctx context.Context, row ledger.Row, c bearer.Claims) (exchangewire.Response, error) {
	if s.Enroll != nil {
		uid, err := s.Enroll(ctx, protocol.Principal{Owner: c.Owner, Actor: c.Actor}, row.Role)
		if err != nil {
			return exchangewire.Response{}, fmt.Errorf("%w: enroll %s/%s: %w", errUnavailable, c.Owner, c.Actor, err)
		}
		c.LifecycleUID = uid
	}
	tok, err := s.Issuer.Issue(c)
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange %s/%s: %w", c.Owner, c.Actor, err)
	}
	v, err := s.Issuer.Verify(tok) // read the expiry exactly as a verifier will
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange %s/%s: fresh bearer: %w", c.Owner, c.Actor, err)
	}
	return exchangewire.Response{Token: tok, Owner: c.Owner, Exp: v.Expiry.Unix(), Actor: c.Actor, LifecycleUID: v.LifecycleUID,
		ExpiresAt: v.Expiry.UnixMilli()}, nil
}

// rowHasIdentity reports whether the row names the IdP identity (iss, sub): a qualified
// subject "<iss>|<sub>", or the bare subject sub when IdPIssuer is empty or equals iss.
func (s *Server) rowHasIdentity(row ledger.Row, iss, sub string) bool {
	for _, e := range row.Subjects {
		ei, es, q := ledger.SplitSubject(e)
		if es != sub {
			continue
		}
		if q && ei == iss || !q && (s.IdPIssuer == "" || s.IdPIssuer == iss) {
			return true
		}
	}
	return false
}
