// Package callout answers the NATS auth callout of a user-auth space.
//
// nats-server publishes an authorization request on $SYS.REQ.USER.AUTH for every client
// that lands in the space's callout account (AUTH_<space>) and is not one of its
// auth_users. The request is sealed to the callout account's X25519 xkey. A Responder opens
// it, checks it came from the server that sealed it, asks an Authorizer whether the
// connection may enter, and answers with an authorization response that carries a user JWT
// of the space's data account (or an error), signed by the callout account and sealed back
// to the server.
//
// A request that is not sealed, does not open, is not signed by the server, or whose signed
// server xkey is not the one that sealed it gets no reply at all: the server times out and
// denies the connect. The X25519 shared key with a server is derived once per server xkey
// and kept for at most MaxServerKeys servers; a key is kept only once a request sealed
// with it passed every check, so forged Nats-Server-Xkey headers never grow the cache.
//
// With Config.ServiceEndpoints (the --service-endpoints flag) the responder is also the
// NATS micro service ServiceName on the callout account, visible to `nats micro ls` and
// $SRV.PING/INFO/STATS with its request counts; the replies on the wire do not change.
package callout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

const (
	// Subject is where nats-server publishes authorization requests.
	Subject = "$SYS.REQ.USER.AUTH"
	// QueueGroup is the queue group every callout responder of a space joins.
	QueueGroup = "cotal-auth-callout"
	// XKeyHeader names the header carrying the public xkey the server sealed with.
	XKeyHeader = "Nats-Server-Xkey"
)

// flushTimeout bounds the wait for the server to confirm the subscription.
const flushTimeout = 10 * time.Second

// DefaultTimeout is the bound on one Authorize call when Config.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// DefaultWorkers is how many requests Run answers at once when Config.Workers is zero:
// enough to keep both the signing and the authorizer's ledger round trip busy while other
// requests wait on theirs.
const DefaultWorkers = 4

// ErrDropped marks a request that gets no reply: the server times out and denies.
var ErrDropped = errors.New("callout request dropped")

// Grant is what an Authorizer lets a connection do in the data account.
type Grant struct {
	Name        string          // user JWT name; empty is allowed
	Permissions jwt.Permissions // the connection's publish/subscribe/response permissions
	Tags        jwt.TagList     // set as given (not lower-cased)
	Expires     time.Time       // the user JWT's expiry; zero means none
	Limits      jwt.NatsLimits  // the user JWT's per-connection limits; the zero value leaves them unlimited
}

// Authorizer decides whether a connection may enter the data account. req has passed
// every sealing and signature check; it carries the client's CONNECT options (auth_token,
// user_nkey) and client info. A returned error refuses the connection and its text goes
// back to the server in the signed error response; an error wrapping ErrDropped gets no
// reply at all (an authorizer that may no longer speak for the account, say).
type Authorizer interface {
	Authorize(ctx context.Context, req *jwt.AuthorizationRequest) (Grant, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, req *jwt.AuthorizationRequest) (Grant, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, req *jwt.AuthorizationRequest) (Grant, error) {
	return f(ctx, req)
}

// Config is what a Responder needs. Every key field is required.
type Config struct {
	Authorizer Authorizer
	// XKey is the callout account's curve key pair (prefix X); its public key is the
	// account JWT's authorization xkey.
	XKey nkeys.KeyPair
	// CalloutAccount is the callout account's public key.
	CalloutAccount string
	// CalloutSigner signs the authorization responses: the callout account key itself or
	// one of its signing keys.
	CalloutSigner nkeys.KeyPair
	// DataAccount is the public key of the account connections are placed into; it must
	// be in the callout account's allowed_accounts.
	DataAccount string
	// DataSigner signs the user JWTs: a signing key of DataAccount.
	DataSigner nkeys.KeyPair
	// Timeout bounds one Authorize call; zero means DefaultTimeout (2 s).
	Timeout time.Duration
	// Logger receives drop and refusal events; nil means discard.
	Logger *slog.Logger
	// ServiceEndpoints registers Run's responder as the NATS micro service ServiceName
	// (the --service-endpoints flag), so $SRV.PING, $SRV.INFO and $SRV.STATS on the
	// callout account list it with its request counts; false means a plain queue
	// subscription and no $SRV subscriptions.
	ServiceEndpoints bool
	// Space names the space in the service metadata; empty leaves it out.
	Space string
	// Workers is how many requests Run answers at once without ServiceEndpoints; zero
	// means DefaultWorkers. The micro service (ServiceEndpoints) answers one at a time, as
	// micro counts a failed reply only from inside its handler.
	Workers int
}

// Responder answers auth callout requests. Make one with New; it is safe for concurrent
// use.
type Responder struct {
	cfg           Config
	calloutSigner *signer
	dataSigner    *signer
	keys          *keyCache
	log           *slog.Logger
}

// New checks cfg and returns its Responder.
func New(cfg Config) (*Responder, error) {
	if cfg.Authorizer == nil {
		return nil, errors.New("callout: no authorizer")
	}
	if cfg.XKey == nil || cfg.CalloutSigner == nil || cfg.DataSigner == nil {
		return nil, errors.New("callout: xkey, callout signer and data signer are required")
	}
	if !nkeys.IsValidPublicAccountKey(cfg.CalloutAccount) || !nkeys.IsValidPublicAccountKey(cfg.DataAccount) {
		return nil, errors.New("callout: callout and data accounts must be account public keys")
	}
	keys, err := newKeyCache(cfg.XKey)
	if err != nil {
		return nil, fmt.Errorf("callout: %w", err)
	}
	calloutSigner, err := newSigner(cfg.CalloutSigner)
	if err != nil {
		return nil, fmt.Errorf("callout: callout signer: %w", err)
	}
	dataSigner, err := newSigner(cfg.DataSigner)
	if err != nil {
		return nil, fmt.Errorf("callout: data signer: %w", err)
	}
	if !nkeys.IsValidPublicAccountKey(calloutSigner.pub) || !nkeys.IsValidPublicAccountKey(dataSigner.pub) {
		return nil, errors.New("callout: signers must be account keys")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Responder{cfg: cfg, calloutSigner: calloutSigner, dataSigner: dataSigner, keys: keys, log: log}, nil
}

// CachedKeys returns how many server xkeys have a cached shared key.
func (r *Responder) CachedKeys() int { return r.keys.len() }

// Run serves requests on nc, a connection of the callout account's callout user, in queue
// group QueueGroup, Config.Workers at a time. With Config.ServiceEndpoints set it serves
// them one at a time as the NATS micro service ServiceName, whose endpoint stats carry a
// Stats. It calls ready once the subscriptions are on the server, blocks until ctx ends and
// returns nil then, or returns an error wrapping nats.ErrConnectionClosed once nc closes;
// no request is being answered after it returns, and one still queued then is dropped.
func (r *Responder) Run(ctx context.Context, nc *nats.Conn, ready func()) error {
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)
	if nc.IsClosed() {
		return fmt.Errorf("callout: %w", nats.ErrConnectionClosed)
	}
	if r.cfg.ServiceEndpoints {
		return r.runService(ctx, nc, ready, closed)
	}
	var st counters
	msgs := make(chan *nats.Msg, 256)
	sub, err := nc.ChanQueueSubscribe(Subject, QueueGroup, msgs)
	if err != nil {
		return fmt.Errorf("callout: subscribe %s: %w", Subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fctx, cancel := context.WithTimeout(ctx, flushTimeout)
	err = nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("callout: flush subscription: %w", err)
	}
	stop := make(chan struct{})
	var workers sync.WaitGroup
	defer func() { // runs before the unsubscribe: no worker answers once Run returns
		close(stop)
		workers.Wait()
	}()
	for range r.cfg.Workers {
		workers.Go(func() {
			for {
				select {
				case <-stop:
					return
				case m := <-msgs:
					select {
					case <-stop: // taken as Run stops: drop it, the server times out
						return
					default:
					}
					r.serve(ctx, m.Header.Get(XKeyHeader), m.Data, &st, m.Respond)
				}
			}
		})
	}
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-closed:
		return fmt.Errorf("callout: %w", nats.ErrConnectionClosed)
	}
}

// serve answers one request with send, or drops it, and counts the outcome in st.
func (r *Responder) serve(ctx context.Context, serverXKey string, body []byte, st *counters, send func([]byte) error) {
	reply, refused, err := r.respond(ctx, serverXKey, body)
	if err != nil {
		st.dropped.Add(1)
		r.log.Warn("callout request dropped", "err", err)
		return
	}
	if refused {
		st.refused.Add(1)
	} else {
		st.granted.Add(1)
	}
	if err := send(reply); err != nil {
		r.log.Warn("callout reply", "err", err)
	}
}

// Respond turns one sealed request body, sealed with the server xkey serverXKey (the
// Nats-Server-Xkey header), into the sealed response to send back. An error wraps
// ErrDropped and means send nothing.
func (r *Responder) Respond(ctx context.Context, serverXKey string, body []byte) ([]byte, error) {
	out, _, err := r.respond(ctx, serverXKey, body)
	return out, err
}

// respond is Respond that also reports whether the sealed response is a refusal.
func (r *Responder) respond(ctx context.Context, serverXKey string, body []byte) (out []byte, refused bool, err error) {
	if serverXKey == "" {
		return nil, false, fmt.Errorf("%w: unsealed request (no %s header)", ErrDropped, XKeyHeader)
	}
	key, cached, err := r.keys.shared(serverXKey)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrDropped, err)
	}
	plain, err := open(key, body)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrDropped, err)
	}
	req, err := decodeRequest(string(plain))
	if err != nil {
		return nil, false, fmt.Errorf("%w: request jwt: %w", ErrDropped, err)
	}
	vr := jwt.CreateValidationResults()
	req.Validate(vr)
	for _, issue := range vr.Issues { // time checks included: an expired request is stale
		if issue.Blocking || issue.TimeCheck {
			return nil, false, fmt.Errorf("%w: request jwt: %s", ErrDropped, issue.Description)
		}
	}
	srv := req.Server
	if srv.ID == "" || req.Issuer != srv.ID || !nkeys.IsValidPublicServerKey(srv.ID) {
		return nil, false, fmt.Errorf("%w: request issuer %q is not its server %q", ErrDropped, req.Issuer, srv.ID)
	}
	if srv.XKey != serverXKey {
		return nil, false, fmt.Errorf("%w: signed server xkey %q is not the sealing key %q", ErrDropped, srv.XKey, serverXKey)
	}
	if !cached {
		r.keys.keep(serverXKey, key)
	}

	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = srv.ID
	if r.calloutSigner.pub != r.cfg.CalloutAccount {
		resp.IssuerAccount = r.cfg.CalloutAccount
	}
	user, err := r.authorize(ctx, &req.AuthorizationRequest)
	if errors.Is(err, ErrDropped) {
		return nil, false, err
	}
	if err != nil {
		r.log.Info("callout refused", "user", req.UserNkey, "server", srv.ID, "err", err)
		resp.Error = err.Error()
		refused = true
	} else {
		resp.Jwt = user
	}
	token, err := encodeResponse(resp, r.calloutSigner, time.Now())
	if err != nil {
		return nil, false, fmt.Errorf("%w: response jwt: %w", ErrDropped, err)
	}
	out, err = seal(key, []byte(token))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrDropped, err)
	}
	return out, refused, nil
}

// authorize asks the Authorizer and mints the data-account user JWT for req.UserNkey.
func (r *Responder) authorize(parent context.Context, req *jwt.AuthorizationRequest) (string, error) {
	ctx, cancel := context.WithTimeout(parent, r.cfg.Timeout)
	defer cancel()
	g, err := r.cfg.Authorizer.Authorize(ctx, req)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return "", fmt.Errorf("not authorized: no decision within the authorization timeout of %s: %w", r.cfg.Timeout, err)
	}
	if err != nil {
		return "", fmt.Errorf("not authorized: %w", err)
	}
	if !g.Expires.IsZero() && !g.Expires.After(time.Now()) {
		return "", errors.New("not authorized: grant already expired")
	}
	uc := jwt.NewUserClaims(req.UserNkey)
	uc.Name = g.Name
	if r.dataSigner.pub != r.cfg.DataAccount {
		uc.IssuerAccount = r.cfg.DataAccount
	}
	uc.Permissions = g.Permissions
	uc.Tags = g.Tags
	if !g.Expires.IsZero() {
		uc.Expires = g.Expires.Unix()
	}
	if g.Limits != (jwt.NatsLimits{}) {
		uc.Limits.NatsLimits = g.Limits
	}
	token, err := encodeUser(uc, r.dataSigner, time.Now())
	if err != nil {
		return "", fmt.Errorf("mint user jwt: %w", err)
	}
	return token, nil
}
