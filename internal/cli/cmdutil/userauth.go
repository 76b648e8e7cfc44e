package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/meshreg"
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
		"its peers sign in with "+pin.LoginURL()+" and hold the sentinel creds plus a short-lived bearer, never static creds: grant an actor (cotal actor grant NAME --sub SUBJECT), sign in, then join as it",
		"cotal login --idp "+pin.LoginURL())
}

// signIn is how a client reaches a user-auth space's auth service: its exchange, the
// sentinel creds and the IdP whose people it admits.
type signIn struct {
	exchange *userauth.Exchanger
	sentinel []byte
	issuer   string // the IdP, for cotal login
	clientID string
	// refURL, set for an IdP pinned the reference's way, is its base URL: ID tokens come
	// from the IdP session cotal login kept for it (devicelogin.RefIDToken).
	refURL string
}

// idToken returns a fresh ID token of the person signed in to the space's IdP.
func (si signIn) idToken(ctx context.Context, logins string) (string, error) {
	if si.refURL != "" {
		return devicelogin.RefIDToken(ctx, logins, si.refURL)
	}
	return devicelogin.IDToken(ctx, logins, si.issuer, si.clientID)
}

// localSignIn reads the sign-in of a user-auth space the project serves.
func localSignIn(t Target, pin authsvc.Pin) (signIn, error) {
	chain, err := trust.Open(t.Project.AuthDir())
	if err != nil {
		return signIn{}, err
	}
	dir := authsvc.StateDir(chain.Dir(), t.Space)
	st, err := authsvc.ReadStatus(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return signIn{}, Refuse(fmt.Sprintf("a connection to user-auth space %q", t.Space), "its auth service is not ready (no "+filepath.Join(dir, authsvc.StatusFile)+")",
			"cotal up --space "+t.Space+"  # or see "+t.Project.AuthServiceLogFile(t.Space))
	}
	if err != nil {
		return signIn{}, err
	}
	sentinel, err := authsvc.ReadSentinel(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return signIn{}, Refuse(fmt.Sprintf("a connection to user-auth space %q", t.Space),
			"its auth service has not written the sentinel creds file "+filepath.Join(dir, authsvc.SentinelFile)+" (it was started by an older release)",
			"cotal down auth --space "+t.Space+" && cotal up --space "+t.Space)
	}
	if err != nil {
		return signIn{}, err
	}
	si := signIn{exchange: &userauth.Exchanger{URL: st.URL, Cap: st.Cap}, sentinel: sentinel,
		issuer: pin.Issuer, clientID: pin.ClientID}
	if !pin.OIDC() {
		si.refURL = pin.URL
	}
	return si, nil
}

// remoteSignIn is the sign-in of a mesh registered with cotal meshes add: its public face.
func remoteSignIn(e *meshreg.Entry) signIn {
	si := signIn{exchange: &userauth.Exchanger{URL: e.ExchangeURL}, sentinel: []byte(e.SentinelCreds),
		issuer: e.IdPIssuer, clientID: e.IdPClientID}
	if e.ReferenceIdP() {
		si.refURL = e.LoginURL()
	}
	return si
}

// connectUserAuth connects to a user-auth space as the person signed in with its IdP
// (cotal login), acting as cfg.Actor (or cfg.Name), with userauth.Connect; a broker that
// refuses the bearer gets the login command as its next step.
func (f *Factory) connectUserAuth(ctx context.Context, t Target, cfg client.Config, si signIn) (*client.Endpoint, error) {
	ep, err := userauth.Connect(ctx, userauth.ConnectOptions{
		Server:        t.Server,
		Space:         t.Space,
		Exchanger:     si.exchange,
		SentinelCreds: si.sentinel,
		IDToken: func(ctx context.Context) (string, error) {
			logins, err := f.LoginDir()
			if err != nil {
				return "", err
			}
			return si.idToken(ctx, logins)
		},
		Config:      cfg,
		NATSOptions: t.TLSOptions(),
		Logger:      f.Logger,
	})
	if ce, ok := errors.AsType[*userauth.ConnectError](err); ok {
		if refusedAuth(ce) {
			return nil, WithNext(ce, "cotal login --idp "+si.issuer)
		}
		return nil, connectError(t, ce)
	}
	return ep, err
}

// MeshRegistryDir is where `cotal meshes add` registers remote meshes: <config dir>/meshes.
func (f *Factory) MeshRegistryDir() (string, error) {
	dir, err := f.ConfigDir()
	if err != nil {
		return "", fmt.Errorf("mesh registry: %w", err)
	}
	return filepath.Join(dir, "meshes"), nil
}
