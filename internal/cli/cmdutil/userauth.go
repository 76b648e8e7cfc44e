package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/login"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// ActorEnv names the actor the person at the keyboard acts as on a user-auth space, for
// commands without --name (send, status, console); default the login name (see
// OperatorIdentity).
const ActorEnv = "COTAL_ACTOR"

// LoginDir is where `cotal login` keeps IdP sessions: <config dir>/logins.
func (f *Factory) LoginDir() (string, error) {
	dir, err := f.ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "logins"), nil
}

// userAuthPin returns the IdP pin of the target's space when it is a user-auth space of
// the target's project.
func userAuthPin(t Target) (authsvc.Pin, bool, error) {
	if t.Project == nil || t.Creds != "" || t.CredsData != nil || !t.Auth() {
		return authsvc.Pin{}, false, nil
	}
	pin, err := authsvc.ReadPin(t.Project.AuthDir(), t.Space)
	if errors.Is(err, authsvc.ErrNotUserAuth) {
		return authsvc.Pin{}, false, nil
	}
	return pin, err == nil, err
}

// CheckStatic refuses what (a static credential) when the target's space is a user-auth
// space: static minting is refused there.
func CheckStatic(t Target, what string) error {
	pin, ok, err := userAuthPin(t)
	if err != nil || !ok {
		return err
	}
	return Refuse(fmt.Sprintf("%s on user-auth space %q", what, t.Space),
		"its peers sign in with "+pin.Issuer+" and hold the sentinel creds plus a short-lived bearer, never static creds",
		"cotal actor grant <name> --sub <IdP subject> ...; cotal login --idp "+pin.Issuer+"; cotal join --name <name>")
}

// connectUserAuth connects to a user-auth space as the person signed in with its IdP
// (cotal login), acting as cfg.Actor (or cfg.Name): the sentinel creds plus a bearer from
// the space's exchange, renewed for as long as ctx lasts and the connection is open.
func (f *Factory) connectUserAuth(ctx context.Context, t Target, cfg client.Config, as As, pin authsvc.Pin) (*client.Endpoint, error) {
	actor := cfg.Actor
	if actor == "" {
		actor = cfg.Name
	}
	if !protocol.ValidActor(actor) {
		return nil, fmt.Errorf("user-auth space %q: %q is not an actor name (letters, digits and _)", t.Space, actor)
	}
	chain, err := trust.Open(t.Project.AuthDir())
	if err != nil {
		return nil, err
	}
	dir := authsvc.StateDir(chain.Dir(), t.Space)
	st, err := authsvc.ReadStatus(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Refuse(fmt.Sprintf("connecting to user-auth space %q", t.Space), "its auth service is not ready (no "+filepath.Join(dir, authsvc.StatusFile)+")",
			"cotal up --space "+t.Space+"  # or see "+t.Project.AuthServiceLogFile(t.Space))
	}
	if err != nil {
		return nil, err
	}
	logins, err := f.LoginDir()
	if err != nil {
		return nil, err
	}
	x := &userauth.Exchanger{URL: st.URL, Cap: st.Cap}
	fetch := func(ctx context.Context) (exchange.Response, error) {
		tok, err := login.IDToken(ctx, logins, pin.Issuer, pin.ClientID)
		if err != nil {
			return exchange.Response{}, err
		}
		resp, err := x.Exchange(ctx, exchange.Request{IDToken: tok, Actor: actor})
		if err != nil {
			return exchange.Response{}, fmt.Errorf("act as %q in space %q: %w", actor, t.Space, err)
		}
		return resp, nil
	}
	sess, err := userauth.Start(ctx, fetch, f.Logger)
	if err != nil {
		return nil, err
	}
	ua, err := chain.UserAuth(t.Space)
	if err != nil {
		return nil, err
	}
	opts, err := sess.Options(ua.SentinelCreds())
	if err != nil {
		return nil, err
	}
	me := protocol.Principal{Owner: sess.Current().Owner, Actor: actor}
	cfg.Owner, cfg.Actor = me.Owner, me.Actor
	if cfg.Name == "" {
		cfg.Name = actor
	}
	if cfg.LifecycleUID, err = chain.Identity(t.Space, actor); err != nil {
		return nil, err
	}
	if as.Join {
		if err := provisionAgent(ctx, chain, t, me, cfg.LifecycleUID, cfg.Role); err != nil {
			return nil, err
		}
	}
	ep, err := client.Connect(ctx, t.Server, cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("user-auth space %q on %s as %s: %w", t.Space, t.Server, me, err)
	}
	go sess.Keep(ctx, ep.Conn())
	return ep, nil
}

// provisionAgent creates the bind-only durables of principal p with the project's own
// provisioner identity (the endpoint's callout identity may bind them, not create them).
func provisionAgent(ctx context.Context, chain *trust.Chain, t Target, p protocol.Principal, uid, role string) error {
	acct, err := chain.Space(t.Space)
	if err != nil {
		return err
	}
	b, err := acct.Mint(trust.UserSpec{Name: "cotal provisioner", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_provisioner"}, ExpiresIn: time.Hour})
	if err != nil {
		return err
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(t.Server, append(c.Options(), nats.Timeout(10*time.Second))...)
	if err != nil {
		return fmt.Errorf("provision %s: connect %s: %w", p, t.Server, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("provision %s: %w", p, err)
	}
	_, err = provision.Agent(ctx, js, t.Space, p, uid, role)
	return err
}

// MeshRegistryDir is where `cotal meshes add` registers remote meshes: <config dir>/meshes.
func (f *Factory) MeshRegistryDir() (string, error) {
	dir, err := f.ConfigDir()
	if err != nil {
		return "", fmt.Errorf("mesh registry: %w", err)
	}
	return filepath.Join(dir, "meshes"), nil
}
