package cmdutil

import (
	"context"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// ConnectSenderFunc connects to a target as the person at the keyboard with a sender's
// rights only (Factory.ConnectPersonSender).
type ConnectSenderFunc func(context.Context, Target) (*client.Endpoint, error)

// ConnectPersonSender connects to the target as the person at the keyboard (the
// principal local.<login>, or $COTAL_ACTOR) with that person's rights as a member of the
// space, never the project's: on a user-auth space the person signs in; with --creds that
// credential is used; on an authenticated mesh a credential of the agent profile is
// minted for the person's principal and recorded identity, which posts to any channel,
// DMs and asks anyone as that principal, and reads nothing: the broker refuses it any
// other identity, JetStream administration and the manager's rails. An open mesh has no
// credentials. For surfaces that send on a person's behalf (the dashboard, the console).
func (f *Factory) ConnectPersonSender(ctx context.Context, t Target) (*client.Endpoint, error) {
	name, actor := OperatorIdentity()
	if f.Getenv != nil && f.Getenv(ActorEnv) != "" {
		actor = f.Getenv(ActorEnv)
	}
	cfg := client.Config{Name: name, Actor: actor, Kind: protocol.CardEndpoint}
	if t.Creds == "" && t.CredsData == nil && t.Auth() {
		_, signIn, err := personSignIn(t)
		if err != nil {
			return nil, err
		}
		if !signIn {
			acct, chain, err := f.account(t)
			if err != nil {
				return nil, err
			}
			uid, err := chain.Identity(t.Space, actor)
			if err != nil {
				return nil, err
			}
			creds, err := acct.Mint(trust.UserSpec{Name: name, Profile: trust.ProfileAgent,
				Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}, LifecycleUID: uid,
				Subscribe: []string{}, AllowPublish: []string{">"}})
			if err != nil {
				return nil, err
			}
			t.CredsData = creds
		}
	}
	return f.Connect(ctx, t, cfg, As{Profile: trust.ProfileAgent, Person: true})
}
