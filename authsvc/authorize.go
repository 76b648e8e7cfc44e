package authsvc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/callout"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/userauth"
)

// authorizer admits a sentinel connection whose auth_token is a valid bearer of the space
// for an actor the ledger still grants to the bearer's owner. It is the callout's decision,
// and the only one: the responder that receives the broker's requests, decrypts them and
// signs the answers is package callout (callout.Responder), and the space's callout
// account, its sentinel and the data account's signing keys are trust.UserAuth
// (trust/userauth.go); the permissions of the user JWT come from
// trust.Account.Permissions (trust/profile.go).
type authorizer struct {
	space     string
	chain     *trust.Chain
	data      *trust.Account
	issuer    *bearer.Issuer
	kv        jetstream.KeyValue
	acl       jetstream.KeyValue // where grants are recorded for the delivery daemon
	secret    bearer.OwnerSecret
	idpIssuer string
	fence     *fence
	// verified remembers bearers that passed verification until they expire; nil means
	// every connect verifies its bearer.
	verified *verifiedBearers

	mu       sync.Mutex
	recorded map[string]string // member key -> fingerprint of the last grant recorded
}

// record stores the grant's read ACL for the delivery daemon (delivery.RecordGrant),
// unless the same one is already recorded.
func (a *authorizer) record(ctx context.Context, p protocol.Principal, uid, name, userKey string, sub jwt.Permission) error {
	key := protocol.MemberKey(p, uid)
	fp := strings.Join(sub.Allow, "\n") + "\x00" + strings.Join(sub.Deny, "\n")
	a.mu.Lock()
	same := a.recorded[key] == fp
	a.mu.Unlock()
	if same {
		return nil
	}
	if err := delivery.RecordGrant(ctx, a.acl, p, uid, name, userKey, sub, time.Now()); err != nil {
		return err
	}
	a.mu.Lock()
	a.recorded[key] = fp
	a.mu.Unlock()
	return nil
}

// verifyBearer verifies token through the cache of verified bearers, if there is one.
func (a *authorizer) verifyBearer(token string) (bearer.Claims, error) {
	if a.verified == nil {
		return a.issuer.Verify(token)
	}
	return a.verified.verify(token)
}

// Authorize implements callout.Authorizer.
func (a *authorizer) Authorize(ctx context.Context, req *jwt.AuthorizationRequest) (callout.Grant, error) {
	if a.fence.tripped() {
		return callout.Grant{}, fmt.Errorf("%w: %w", callout.ErrDropped, ErrFenced)
	}
	c, err := a.verifyBearer(req.ConnectOptions.Token)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("bearer refused: %w", err)
	}
	// The reply inbox is the connection's own, named by the client (the reference's
	// callout.ts assertInboxConnId): the server-generated user key is unknown to it.
	inbox := req.ConnectOptions.Name
	if !userauth.ValidInboxName(inbox) {
		return callout.Grant{}, fmt.Errorf("invalid connId/inbox nonce %q - must match [A-Za-z0-9_-]{8,120} (connect with the name ibx<32 hex> and the inbox prefix _INBOX_<name>)", inbox)
	}
	row, err := ledger.Lookup(ctx, a.kv, c.Actor)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	if !row.HasOwner(a.secret, a.idpIssuer, c.Owner) {
		return callout.Grant{}, fmt.Errorf("actor %q is no longer granted to this owner", c.Actor)
	}
	uid := c.LifecycleUID // enrolled at the exchange; a bearer without one is looked up
	if uid == "" {
		if uid, err = a.chain.Identity(a.space, c.Actor); err != nil {
			return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
		}
	}
	p := protocol.Principal{Owner: c.Owner, Actor: c.Actor}
	spec := trust.UserSpec{
		// The reference's callout.ts names the user principalKey(owner, actor).name, the
		// dash form, which CONNZ reports as the connection's authorized user.
		Name:           p.Dash(),
		Profile:        trust.ProfileAgent,
		Principal:      p,
		LifecycleUID:   uid,
		Role:           row.Role,
		AllowSubscribe: row.AllowSubscribe,
		AllowPublish:   row.AllowPublish,
	}
	perms, err := a.data.Permissions(spec, req.UserNkey)
	if err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	// The profile's inbox is the server-generated user key's; grant the connection's
	// named one instead.
	own := "_INBOX_" + req.UserNkey + ".>"
	for i, s := range perms.Sub.Allow {
		if s == own {
			perms.Sub.Allow[i] = userauth.InboxPrefix(inbox) + ".>"
		}
	}
	tags := jwt.TagList{"owner:" + c.Owner, "actor:" + c.Actor, "principal:" + spec.Principal.String(), "uid:" + uid}
	if row.Role != "" {
		tags = append(tags, "role:"+row.Role)
	}
	tags = append(tags, "profile:"+string(trust.ProfileAgent))
	if err := a.record(ctx, spec.Principal, uid, spec.Name, req.UserNkey, perms.Sub); err != nil {
		return callout.Grant{}, fmt.Errorf("actor %q: %w", c.Actor, err)
	}
	if a.fence.tripped() { // fenced while this request was being decided
		return callout.Grant{}, fmt.Errorf("%w: %w", callout.ErrDropped, ErrFenced)
	}
	// The space's per-connection limits, as in every credential the account mints. The
	// broker applies the data account's own (trust.Limits) to the connection either way.
	return callout.Grant{Name: spec.Name, Permissions: perms, Tags: tags, Expires: c.Expiry, Limits: a.data.UserLimits()}, nil
}
