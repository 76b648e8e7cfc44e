package exchange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
)

// Request is the body of POST /exchange. A human sets IDToken and Actor; an agent sets
// Owner, Actor and ActorToken. Mixing the two is refused.
type Request struct {
	IDToken    string `json:"idToken,omitempty"`    // human: the IdP ID token
	Owner      string `json:"owner,omitempty"`      // agent: the owner the actor token belongs to
	Actor      string `json:"actor"`                // the actor to act as; both kinds
	ActorToken string `json:"actorToken,omitempty"` // agent: a still-valid bearer of Owner
}

// Response is the body of a successful exchange.
type Response struct {
	Token     string `json:"token"`     // the Cotal bearer
	ExpiresAt int64  `json:"expiresAt"` // its expiry, unix milliseconds
	Owner     string `json:"owner"`
	Actor     string `json:"actor"`
	// LifecycleUID is the actor's incarnation, which names its DM durable; set when the
	// server enrolls principals (Server.Enroll).
	LifecycleUID string `json:"lifecycleUid,omitempty"`
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
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the exchange cannot reach the ledger; retry shortly and see the auth service log")
		return
	}
	rf, ok := errors.AsType[*refusal](err)
	if !ok { // the exchange's own failure: not the client's, so not throttled
		s.Logger.Error("exchange failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the exchange failed; see the auth service log")
		return
	}
	p := f.peer(r)
	if retry, throttled := f.throttle.refused(p); throttled {
		s.Logger.Warn("exchange throttled", "face", f.name, "peer", p, "code", rf.code)
		w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "throttled",
			fmt.Sprintf("too many refused exchanges from this peer; retry after %s", retry.Round(time.Second)))
		return
	}
	s.Logger.Warn("exchange refused", "face", f.name, "peer", p, "code", rf.code, "err", rf.detail)
	if rf.status == http.StatusUnauthorized && rf.code == "unauthorized" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cotal-exchange"`)
	}
	writeError(w, rf.status, rf.code, rf.msg)
}

// serveExchange checks the request hygiene and, with needCap, the capability, then runs the
// grant.
func (s *Server) serveExchange(r *http.Request, needCap bool) (Response, error) {
	if r.Header.Get("Origin") != "" {
		return Response{}, refuse(http.StatusForbidden, "origin_refused",
			"requests with an Origin header are refused: the exchange is not for browsers", nil)
	}
	if needCap && !s.capOK(r) {
		return Response{}, refuse(http.StatusUnauthorized, "unauthorized",
			"missing or wrong capability: send Authorization: Bearer <cap> with the cap from auth-service.json", nil)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return Response{}, refuse(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"send the body as Content-Type: application/json", err)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return Response{}, refuse(http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("the body exceeds %d bytes", MaxBody), err)
		}
		return Response{}, refuse(http.StatusBadRequest, "bad_request", "the body could not be read", err)
	}
	req, err := decode(body)
	if err != nil {
		return Response{}, refuse(http.StatusBadRequest, "bad_request", err.Error(), err)
	}
	switch {
	case req.IDToken != "":
		return s.human(r.Context(), req)
	default:
		return s.agent(r.Context(), req)
	}
}

// decode parses one closed JSON object and checks which grant type it is.
func decode(body []byte) (Request, error) {
	var req Request
	if err := strictjson.Decode(body, &req); err != nil {
		return Request{}, fmt.Errorf("the body is not one JSON object of idToken, actor, owner, actorToken: %w", err)
	}
	human := req.IDToken != ""
	agent := req.Owner != "" || req.ActorToken != ""
	switch {
	case human && agent:
		return Request{}, errors.New("send either idToken (a human) or owner and actorToken (an agent), not both")
	case !human && !agent:
		return Request{}, errors.New("send idToken (a human) or owner and actorToken (an agent)")
	case agent && (req.Owner == "" || req.ActorToken == ""):
		return Request{}, errors.New("an agent exchange needs both owner and actorToken")
	case !protocol.ValidActor(req.Actor):
		return Request{}, fmt.Errorf("actor %q: use 1 to %d letters, digits and _", req.Actor, protocol.MaxActorLength)
	}
	return req, nil
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
func (s *Server) human(ctx context.Context, req Request) (Response, error) {
	iss, sub, err := s.IdP.VerifyIDToken(ctx, req.IDToken)
	if err != nil {
		return Response{}, refuse(http.StatusUnauthorized, "refused",
			"the ID token was not accepted (expired, wrong issuer or audience, or bad signature); log in again", err)
	}
	row, err := s.row(ctx, req.Actor)
	if err != nil {
		return Response{}, err
	}
	if !s.rowHasIdentity(row, iss, sub) {
		return Response{}, notGranted(req.Actor, fmt.Errorf("no subject of the row matches %q", sub))
	}
	return s.issue(ctx, row, bearer.Claims{Owner: bearer.Owner(s.OwnerSecret, iss, sub), Actor: req.Actor, Kind: bearer.KindHuman, Scope: row.Scopes, TTL: bearer.MaxHumanLifetime})
}

// agent exchanges a still-valid bearer of req.Owner for a short agent bearer.
func (s *Server) agent(ctx context.Context, req Request) (Response, error) {
	c, err := s.Issuer.Verify(req.ActorToken)
	if err != nil {
		return Response{}, refuse(http.StatusUnauthorized, "refused",
			"the actor token is not a valid bearer of this space (expired, or from another space); get a fresh one", err)
	}
	if c.Owner != req.Owner {
		return Response{}, refuse(http.StatusUnauthorized, "refused",
			"the actor token belongs to another owner", fmt.Errorf("token owner %q, asked %q", c.Owner, req.Owner))
	}
	row, err := s.row(ctx, req.Actor)
	if err != nil {
		return Response{}, err
	}
	if !row.HasOwner(s.OwnerSecret, s.IdPIssuer, req.Owner) {
		return Response{}, notGranted(req.Actor, fmt.Errorf("no subject of the row derives to owner %q", req.Owner))
	}
	return s.issue(ctx, row, bearer.Claims{Owner: req.Owner, Actor: req.Actor, Kind: bearer.KindAgent, Scope: row.Scopes, TTL: bearer.MaxAgentLifetime})
}

// issue enrolls the principal (when the server enrolls), signs the bearer, which carries
// the enrolled lifecycle uid, and builds the response.
func (s *Server) issue(ctx context.Context, row ledger.Row, c bearer.Claims) (Response, error) {
	if s.Enroll != nil {
		uid, err := s.Enroll(ctx, protocol.Principal{Owner: c.Owner, Actor: c.Actor}, row.Role)
		if err != nil {
			return Response{}, fmt.Errorf("%w: enroll %s/%s: %w", errUnavailable, c.Owner, c.Actor, err)
		}
		c.LifecycleUID = uid
	}
	tok, err := s.Issuer.Issue(c)
	if err != nil {
		return Response{}, fmt.Errorf("exchange %s/%s: %w", c.Owner, c.Actor, err)
	}
	v, err := s.Issuer.Verify(tok) // read the expiry exactly as a verifier will
	if err != nil {
		return Response{}, fmt.Errorf("exchange %s/%s: fresh bearer: %w", c.Owner, c.Actor, err)
	}
	return Response{Token: tok, ExpiresAt: v.Expiry.UnixMilli(), Owner: c.Owner, Actor: c.Actor, LifecycleUID: v.LifecycleUID}, nil
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
