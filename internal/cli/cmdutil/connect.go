package cmdutil

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// As says how a command connects to an authenticated mesh without --creds.
type As struct {
	Profile trust.Profile // the profile of the credential minted for the operator at the keyboard
	Join    bool          // the endpoint will Join: give it a stable identity and its durables
	// Person: the command acts for the person at the keyboard, who on a user-auth space
	// signs in (cotal login) instead of using the project's keys.
	Person bool
}

// Connect connects to the target as cfg (its Space is taken from the target) with the
// right credential, one source each (connectUserAuth, connectCreds, connectMinted, dial):
// on a user-auth space with as.Person, the person signed in with the space's IdP; the
// creds file given with --creds (or a credential in hand), whose principal, lifecycle uid
// and role win over cfg's; otherwise, on an authenticated mesh, a credential minted on the
// fly from the project's own signing key (the operator at the keyboard) with as.Profile,
// which with as.Join gets its recorded lifecycle uid and its bind-only durables; none on
// an open mesh.
func (f *Factory) Connect(ctx context.Context, t Target, cfg client.Config, as As) (*client.Endpoint, error) {
	cfg.Space = t.Space
	if cfg.Logger == nil {
		cfg.Logger = f.Logger
	}
	if err := checkTLSCA(t.TLSCA); err != nil { // before anything is minted or recorded
		return nil, err
	}
	if as.Person {
		si, ok, err := personSignIn(t)
		if err != nil {
			return nil, err
		}
		if ok {
			return f.connectUserAuth(ctx, t, cfg, si)
		}
	}
	switch {
	case t.Creds != "" || t.CredsData != nil:
		return connectCreds(ctx, t, cfg)
	case t.Auth():
		return f.connectMinted(ctx, t, cfg, as)
	default:
		return dial(ctx, t, cfg, nil)
	}
}

// personSignIn is how the person at the keyboard signs in to the target's space, when it
// is a user-auth space: the registered remote mesh's IdP, or the one the project's space
// is pinned to. ok is false on any other space.
func personSignIn(t Target) (si signIn, ok bool, err error) {
	if t.Remote != nil {
		return remoteSignIn(t.Remote), true, nil
	}
	pin, ok, err := userAuthPin(t)
	if err != nil || !ok {
		return signIn{}, false, err
	}
	if si, err = localSignIn(t, pin); err != nil {
		return signIn{}, false, err
	}
	return si, true, nil
}

// connectCreds connects with the creds file of --creds, or the credential in hand
// (t.CredsData), whose principal, lifecycle uid and role win over cfg's.
func connectCreds(ctx context.Context, t Target, cfg client.Config) (*client.Endpoint, error) {
	b := t.CredsData
	if b == nil {
		var err error
		if b, err = ReadCredsFile("--creds", t.Creds); err != nil {
			return nil, err
		}
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		if t.Creds == "" {
			return nil, err // a credential in hand, minted here: not the user's to fix
		}
		return nil, credsError(t, fmt.Errorf("--creds %s: %w", t.Creds, err))
	}
	if c.Principal.Validate() == nil {
		cfg.Owner, cfg.Actor = c.Principal.Owner, c.Principal.Actor
		if cfg.Name == "" || cfg.Name == c.Principal.Actor || !protocol.ValidActor(cfg.Name) {
			cfg.Name = c.Principal.Actor
		}
	}
	if c.LifecycleUID != "" {
		cfg.LifecycleUID = c.LifecycleUID
	}
	if cfg.Role == "" {
		cfg.Role = c.Role
	}
	return dial(ctx, t, cfg, c.Options())
}

// connectMinted connects to an authenticated mesh as the operator at the keyboard, with a
// credential of as.Profile minted on the fly from the project's signing key. With as.Join
// the identity gets its recorded lifecycle uid, and its bind-only durables and read ACL
// are set up once connected.
func (f *Factory) connectMinted(ctx context.Context, t Target, cfg client.Config, as As) (*client.Endpoint, error) {
	acct, chain, err := f.account(t)
	if err != nil {
		return nil, err
	}
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: cfg.Actor}
	if cfg.Actor == "" {
		me.Actor = cfg.Name
	}
	spec := trust.UserSpec{Name: cfg.Name, Profile: as.Profile, Principal: me}
	if as.Join && cfg.LifecycleUID == "" {
		if cfg.LifecycleUID, err = chain.Identity(t.Space, me.Actor); err != nil {
			return nil, err
		}
	}
	spec.LifecycleUID = cfg.LifecycleUID
	minted, err := acct.Mint(spec)
	if err != nil {
		return nil, err
	}
	c, err := trust.ReadCreds(minted)
	if err != nil {
		return nil, err
	}
	ep, err := dial(ctx, t, cfg, c.Options())
	if err != nil || !as.Join {
		return ep, err
	}
	if _, err := provision.Agent(ctx, ep.JetStream(), t.Space, ep.Principal(), cfg.LifecycleUID, cfg.Role); err != nil {
		_ = ep.Close()
		return nil, err
	}
	if err := RecordReadACL(ctx, ep.JetStream(), t.Space, minted); err != nil {
		_ = ep.Close()
		return nil, err
	}
	return ep, nil
}

// dial connects to the target's server as cfg with opts (the credential's) and the
// target's TLS options; a failure says what to check.
func dial(ctx context.Context, t Target, cfg client.Config, opts []nats.Option) (*client.Endpoint, error) {
	ep, err := client.Connect(ctx, t.Server, cfg, append(opts, t.TLSOptions()...)...)
	if err != nil {
		return nil, connectError(t, fmt.Errorf("space %q on %s: %w", t.Space, t.Server, err))
	}
	return ep, nil
}

// ConnectOperator connects to the target as the operator at the keyboard (see
// OperatorIdentity) with profile, from the project's keys even on a user-auth space: a
// one-shot administrative command's identity, not a peer in presence.
func (f *Factory) ConnectOperator(ctx context.Context, t Target, profile trust.Profile) (*client.Endpoint, error) {
	name, actor := OperatorIdentity()
	return f.Connect(ctx, t, client.Config{Name: name, Actor: actor, Kind: protocol.CardEndpoint}, As{Profile: profile})
}

// ConnectPerson connects to the target as the person at the keyboard: like ConnectOperator,
// except that on a user-auth space the person signs in and acts as $COTAL_ACTOR (default
// the login name).
func (f *Factory) ConnectPerson(ctx context.Context, t Target, profile trust.Profile) (*client.Endpoint, error) {
	name, actor := OperatorIdentity()
	if f.Getenv != nil && f.Getenv(ActorEnv) != "" {
		actor = f.Getenv(ActorEnv)
		if !protocol.ValidActor(actor) {
			return nil, FlagErrorf("%s=%q: an actor is 1 to %d letters, digits or _ (no dots, dashes or spaces)", ActorEnv, actor, protocol.MaxActorLength)
		}
	}
	return f.Connect(ctx, t, client.Config{Name: name, Actor: actor, Kind: protocol.CardEndpoint}, As{Profile: profile, Person: true})
}

// account opens the project's trust chain and the account of a space this mesh serves.
func (f *Factory) account(t Target) (*trust.Account, *trust.Chain, error) {
	if t.Remote != nil {
		return nil, nil, Refuse(fmt.Sprintf("administration of remote mesh %q", t.Space),
			"this machine only registered it (cotal meshes add); its keys stay with its operator, so ask them; "+
				"join, send, status and console sign in after cotal login --idp "+t.Remote.IdPIssuer, "")
	}
	if t.Project == nil {
		return nil, nil, Refuse("a connection to an authenticated mesh without --creds",
			"no project's trust chain is at hand to mint an identity: give --creds with a creds file the mesh's operator minted for you", "")
	}
	if t.Mesh != nil && !slices.Contains(t.Mesh.Spaces, t.Space) {
		return nil, nil, Refuse(fmt.Sprintf("space %q", t.Space), "the mesh of "+t.Project.Root+" does not serve it",
			"cotal up --space "+t.Space)
	}
	chain, err := trust.Open(t.Project.AuthDir())
	if err != nil {
		return nil, nil, err
	}
	acct, err := chain.Space(t.Space)
	if err != nil {
		return nil, nil, err
	}
	return acct, chain, nil
}

// AgentCreds mints an agent credential for spec on the target's space from the project's
// signing key, after creating the bind-only durables it needs, and returns the creds.
// An empty spec.LifecycleUID is filled from the agent's recorded identity; a given one (a
// spawn's fresh uid) is kept.
func (f *Factory) AgentCreds(ctx context.Context, t Target, spec trust.UserSpec) ([]byte, error) {
	if err := CheckStatic(t, "static creds for "+spec.Principal.Actor); err != nil {
		return nil, err
	}
	if err := checkTLSCA(t.TLSCA); err != nil { // the connect that follows would refuse it
		return nil, err
	}
	acct, chain, err := f.account(t)
	if err != nil {
		return nil, err
	}
	// Connected first: a mesh that cannot be reached leaves no identity record behind.
	t.Creds, t.CredsData = "", nil
	op, err := f.Connect(ctx, t, client.Config{Name: "provisioner", Kind: protocol.CardEndpoint, Actor: "cotal_provisioner"},
		As{Profile: trust.ProfileProvisioner})
	if err != nil {
		return nil, err
	}
	defer op.Close()
	if spec.LifecycleUID == "" {
		if spec.LifecycleUID, err = chain.Identity(t.Space, spec.Principal.Actor); err != nil {
			return nil, err
		}
	}
	creds, err := acct.Mint(spec)
	if err != nil {
		return nil, err
	}
	if _, err := provision.Agent(ctx, op.JetStream(), t.Space, spec.Principal, spec.LifecycleUID, spec.Role); err != nil {
		return nil, err
	}
	if err := RecordReadACL(ctx, op.JetStream(), t.Space, creds); err != nil {
		return nil, err
	}
	return creds, nil
}

// Mint mints a credential for spec on the target's space from the project's signing key,
// without creating anything on the mesh (for profiles that bind no durable).
func (f *Factory) Mint(t Target, spec trust.UserSpec) ([]byte, error) {
	acct, _, err := f.account(t)
	if err != nil {
		return nil, err
	}
	return acct.Mint(spec)
}

// CredsPath is where `cotal mint` writes a space's creds file for name by default.
func CredsPath(proj *workspace.Project, space, name string) string {
	return proj.CredsDir(space) + string(os.PathSeparator) + name + ".creds"
}
