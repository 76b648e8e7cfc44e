package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// ACL is the read ACL of one member incarnation, taken from the user JWT it presented at
// its durable join: exactly the subscribe permissions the broker enforces for that
// credential. The daemon writes it to the ACL bucket (key <owner>.<actor>.<uid>) and
// checks every copy against it, so a member never receives a durable copy its credential
// could not have read live.
type ACL struct {
	Principal string   `json:"principal"`
	UID       string   `json:"lifecycleUid"`
	Name      string   `json:"name,omitempty"` // the credential's name, matched by @mentions
	UserKey   string   `json:"userKey"`
	SubAllow  []string `json:"subAllow,omitempty"` // empty: the broker allows every subscription
	SubDeny   []string `json:"subDeny,omitempty"`
	IssuedAt  int64    `json:"issuedAt"`          // the JWT's iat, seconds; a row only moves forward
	Expires   int64    `json:"expires,omitempty"` // the JWT's exp, seconds; 0: never
	UpdatedAt int64    `json:"updatedAt"`         // unix ms
}

// Readable reports whether the credential may read a message published on subject at now.
func (a *ACL) Readable(subject string, now time.Time) bool {
	if a.Expires > 0 && now.Unix() >= a.Expires {
		return false
	}
	if len(a.SubAllow) > 0 && !slices.ContainsFunc(a.SubAllow, func(p string) bool { return protocol.ChannelMatches(p, subject) }) {
		return false
	}
	return !slices.ContainsFunc(a.SubDeny, func(p string) bool { return protocol.ChannelMatches(p, subject) })
}

// Covers reports whether the credential's allow list admits a subscription to filter (a
// subject that may hold wildcards), as the broker checks a subscribe.
func (a *ACL) Covers(filter string) bool {
	if len(a.SubAllow) == 0 {
		return true
	}
	return slices.ContainsFunc(a.SubAllow, func(p string) bool { return protocol.ChannelCovers(p, filter) })
}

// member is one member incarnation.
type member struct {
	p   protocol.Principal
	uid string
}

func (m member) key() string { return protocol.MemberKey(m.p, m.uid) }

// errCredential is wrapped by every refusal of a presented credential.
var errCredential = errors.New("credential refused")

// verifier checks the credentials members present on the delivery rail.
type verifier struct {
	account string   // the space's account: every member credential is issued for it
	issuers []string // keys trusted to sign member credentials: the account and its signing key
}

// verify checks that token is a user JWT of this space's account, signed by a trusted key,
// not expired, naming the principal p that sent the request on subject, with a lifecycle
// uid; and that sig is its user key's signature over subject, a newline and body. It
// returns the member incarnation and its ACL row.
func (v *verifier) verify(token, sig, subject string, body []byte, p protocol.Principal, now time.Time) (member, ACL, error) {
	fail := func(format string, args ...any) (member, ACL, error) {
		return member{}, ACL{}, fmt.Errorf("%w: "+format, append([]any{errCredential}, args...)...)
	}
	if token == "" || sig == "" {
		return fail("the request carries no credential (%s and %s headers)", protocol.HeaderJWT, protocol.HeaderSig)
	}
	uc, err := jwt.DecodeUserClaims(token) // checks the JWT's own signature
	if err != nil {
		return fail("%v", err)
	}
	acct := uc.IssuerAccount
	if acct == "" {
		acct = uc.Issuer
	}
	if acct != v.account || !slices.Contains(v.issuers, uc.Issuer) {
		return fail("it was not issued for this space's account")
	}
	if uc.Expires > 0 && now.Unix() >= uc.Expires {
		return fail("it expired at %s", time.Unix(uc.Expires, 0).UTC().Format(time.RFC3339))
	}
	if uc.NotBefore > 0 && now.Unix() < uc.NotBefore {
		return fail("it is not valid before %s", time.Unix(uc.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	var tagged protocol.Principal
	uid := ""
	for _, tag := range uc.Tags {
		k, val, _ := strings.Cut(tag, ":")
		switch k {
		case "owner":
			tagged.Owner = val
		case "actor":
			tagged.Actor = val
		case "uid":
			uid = val
		}
	}
	if tagged != p {
		return fail("it names %s, not the requester %s", tagged, p)
	}
	if !protocol.ValidLifecycleUID(uid) {
		return fail("it names no lifecycle uid, so it has no hand-off durable")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fail("signature: %v", err)
	}
	pub, err := nkeys.FromPublicKey(uc.Subject)
	if err != nil {
		return fail("user key: %v", err)
	}
	if err := pub.Verify(protocol.SignedBytes(subject, body), raw); err != nil {
		return fail("the signature is not its user key's")
	}
	m := member{p: p, uid: uid}
	return m, ACL{
		Principal: p.String(), UID: uid, Name: uc.Name, UserKey: uc.Subject,
		SubAllow: uc.Permissions.Sub.Allow, SubDeny: uc.Permissions.Sub.Deny,
		IssuedAt: uc.IssuedAt, Expires: uc.Expires, UpdatedAt: now.UnixMilli(),
	}, nil
}

// RecordGrant stores in kv, the space's ACL bucket, the read ACL an auth callout granted
// to a connection of member (p, uid) with user key userKey: sub is the subscribe
// permission of the user JWT the callout minted. Such a member holds no credential of its
// own to present (the server generated its key), so it names its uid on the delivery rail
// instead of signing, and the daemon holds its durable copies to this record. The auth
// service calls it at each grant; a record is replaced, never rolled back by an older one.
func RecordGrant(ctx context.Context, kv jetstream.KeyValue, p protocol.Principal, uid, name, userKey string, sub jwt.Permission, issuedAt time.Time) error {
	if !protocol.ValidLifecycleUID(uid) {
		return fmt.Errorf("record grant of %s: lifecycle uid %q", p, uid)
	}
	a := ACL{Principal: p.String(), UID: uid, Name: name, UserKey: userKey, SubAllow: sub.Allow, SubDeny: sub.Deny,
		IssuedAt: issuedAt.Unix(), UpdatedAt: time.Now().UnixMilli()}
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("record grant of %s: %w", p, err)
	}
	if _, err := kv.Put(ctx, protocol.MemberKey(p, uid), b); err != nil {
		return fmt.Errorf("record grant of %s: %w", p, err)
	}
	return nil
}

// granted returns the member and ACL an auth callout recorded for (p, uid) (RecordGrant):
// the proof of a member that names its uid instead of signing.
func granted(ctx context.Context, kv jetstream.KeyValue, p protocol.Principal, uid string, now time.Time) (member, ACL, error) {
	if !protocol.ValidLifecycleUID(uid) {
		return member{}, ACL{}, fmt.Errorf("%w: lifecycle uid %q", errCredential, uid)
	}
	m := member{p: p, uid: uid}
	e, err := kv.Get(ctx, m.key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return member{}, ACL{}, fmt.Errorf("%w: no grant is recorded for %s (uid %s); a request without a signed credential is only taken from a connection an auth callout admitted: reconnect", errCredential, p, uid)
	}
	if err != nil {
		return member{}, ACL{}, fmt.Errorf("read grant of %s: %w", p, err)
	}
	a, err := decodeACL(e.Value())
	if err != nil || a.Principal != p.String() || a.UID != uid {
		return member{}, ACL{}, fmt.Errorf("%w: the grant recorded for %s does not name it", errCredential, p)
	}
	a.UpdatedAt = now.UnixMilli()
	return m, *a, nil
}
