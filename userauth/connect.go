package userauth

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/protocol"
)

// ConnectOptions say how Connect signs a person in to a user-auth space.
type ConnectOptions struct {
	Server string // the broker URL
	Space  string // the space; Config.Space is set to it
	// Exchanger is the space's exchange: the loopback one with its capability (the auth
	// service's status file), or a public face (a discovery bundle's endpoints URL).
	Exchanger *Exchanger
	// SentinelCreds is the text of the space's deny-all sentinel creds file, which every
	// client connects as, carrying its bearer as the connect token.
	SentinelCreds []byte
	// IDToken returns a fresh IdP ID token of the person, such as a login session's
	// (package login). It is called for the first bearer and for every renewal.
	IDToken func(ctx context.Context) (string, error)
	// Config is the endpoint's configuration. Its Actor (or, when empty, Name) is the actor
	// to act as; Owner, LifecycleUID and Callout are set from the exchange's answer, and an
	// empty Name becomes the actor.
	Config client.Config
	// NATSOptions are further connect options, such as client.TLSOptions.
	NATSOptions []nats.Option
	Logger      *slog.Logger // the bearer renewals' log; nil discards
}

// ConnectError is a connect to the broker that failed after the exchange gave a bearer:
// the sign-in worked, the broker (or the way to it) did not. Err is client.Connect's error,
// which wraps nats.ErrAuthorization when the broker (its auth callout) refused the bearer.
type ConnectError struct {
	Space     string
	Server    string
	Principal protocol.Principal
	Err       error
}

// Error reads `user-auth space "<space>" on <server> as <principal>: <err>`.
func (e *ConnectError) Error() string {
	return fmt.Sprintf("user-auth space %q on %s as %s: %v", e.Space, e.Server, e.Principal, e.Err)
}

// Unwrap returns client.Connect's error.
func (e *ConnectError) Unwrap() error { return e.Err }

// Connect connects to a user-auth space as the person whose ID tokens IDToken returns,
// acting as Config.Actor (or Config.Name): it exchanges an ID token for a bearer of that
// actor, connects with the sentinel creds and the bearer, and renews the bearer (with a
// reconnect) for as long as ctx lasts and the connection is open. The auth service enrolls
// the principal at the exchange (its lifecycle uid and bind-only durables), so joining
// needs no key of the space. A refused or failed exchange is returned as it is (wrapping
// ErrRefused when refused); a failed broker connect is a *ConnectError.
func Connect(ctx context.Context, opts ConnectOptions) (*client.Endpoint, error) {
	cfg := opts.Config
	cfg.Space = opts.Space
	actor := cfg.Actor
	if actor == "" {
		actor = cfg.Name
	}
	if !protocol.ValidActor(actor) {
		return nil, fmt.Errorf("user-auth space %q: %q is not an actor name (letters, digits and _)", opts.Space, actor)
	}
	if opts.Exchanger == nil || opts.IDToken == nil {
		return nil, fmt.Errorf("user-auth space %q: ConnectOptions needs an Exchanger and an IDToken function", opts.Space)
	}
	fetch := func(ctx context.Context) (exchangewire.Response, error) {
		tok, err := opts.IDToken(ctx)
		if err != nil {
			return exchangewire.Response{}, err
		}
		resp, err := opts.Exchanger.Exchange(ctx, exchangewire.Request{IDPToken: tok, Actor: actor})
		if err != nil {
			return exchangewire.Response{}, fmt.Errorf("act as %q in space %q: %w", actor, opts.Space, err)
		}
		return resp, nil
	}
	sess, err := Start(ctx, fetch, opts.Logger)
	if err != nil {
		return nil, err
	}
	natsOpts, err := sess.Options(opts.SentinelCreds)
	if err != nil {
		return nil, err
	}
	cur := sess.Current()
	me := protocol.Principal{Owner: cur.Owner, Actor: actor}
	cfg.Owner, cfg.Actor, cfg.LifecycleUID, cfg.Callout = me.Owner, me.Actor, cur.LifecycleUID, true
	if cfg.Name == "" {
		cfg.Name = actor
	}
	ep, err := client.Connect(ctx, opts.Server, cfg, append(natsOpts, opts.NATSOptions...)...)
	if err != nil {
		return nil, &ConnectError{Space: opts.Space, Server: opts.Server, Principal: me, Err: err}
	}
	go sess.Keep(ctx, ep.Conn())
	return ep, nil
}
