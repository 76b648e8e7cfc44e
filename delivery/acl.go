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

// ACL is the read ACL row of one member incarnation in cotal_acl_<space>, key
// <owner>.<actor>.<uid>: the reference's AclRecord (acls.ts), written by whoever mints the
// member's credential (CommitACL: cotal mint, the auth callout through RecordGrant) and
// read by the daemon before every durable join and every copy, so a member never receives
// a durable copy of a channel outside it. AllowSubscribe holds channel patterns; [] reads
// nothing. IssuedAt is a Go extension (the reference ignores it): the iat, in seconds, of
// the credential a row was taken from when a member presented its user JWT on the
// delivery rail, so an older credential cannot roll a row back.
type ACL struct {
	AllowSubscribe       []string `json:"allowSubscribe"`
	IssuedAllowSubscribe []string `json:"issuedAllowSubscribe"`
	Revision             uint64   `json:"revision"`
	UpdatedAt            int64    `json:"updatedAt"` // unix ms
	IssuedAt             int64    `json:"issuedAt,omitempty"`
}

// Readable reports whether the row lets its member read the concrete channel ch: a
// pattern of AllowSubscribe matches it, and one of IssuedAllowSubscribe (the ceiling its
// credential was issued with) too.
func (a *ACL) Readable(ch string) bool {
	return protocol.ChannelCovered(a.AllowSubscribe, ch) && protocol.ChannelCovered(a.IssuedAllowSubscribe, ch)
}

// Covers reports whether the row admits a durable join of channel, which may be a pattern
// (a Go extension): every channel it matches is readable.
func (a *ACL) Covers(channel string) bool {
	return protocol.ChannelCovered(a.AllowSubscribe, channel) && protocol.ChannelCovered(a.IssuedAllowSubscribe, channel)
}

// decodeACL reads an ACL row leniently: the reference's form (any object with an
// allowSubscribe array; issuedAllowSubscribe, when absent, is allowSubscribe), or the row
// earlier Go releases wrote from a member's JWT ({principal, lifecycleUid, subAllow, ...}),
// whose subscribe subjects become channel patterns of space. A row that is neither, or an
// earlier Go row without a subscribe allow list, is an error: absent, never "allow all".
func decodeACL(space string, b []byte) (*ACL, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, err
	}
	if raw, ok := probe["allowSubscribe"]; ok {
		var allow []string
		if err := json.Unmarshal(raw, &allow); err != nil || allow == nil {
			return nil, errors.New("allowSubscribe is not an array of strings")
		}
		var a ACL
		if err := json.Unmarshal(b, &a); err != nil {
			a = ACL{AllowSubscribe: allow} // a garbled optional field: keep what is readable
		}
		if a.IssuedAllowSubscribe == nil {
			a.IssuedAllowSubscribe = a.AllowSubscribe
		}
		return &a, nil
	}
	var old struct {
		SubAllow  []string `json:"subAllow"`
		IssuedAt  int64    `json:"issuedAt"`
		UpdatedAt int64    `json:"updatedAt"`
	}
	if _, ok := probe["subAllow"]; !ok {
		return nil, errors.New("no allowSubscribe array")
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	allow := channelsOf(space, old.SubAllow)
	return &ACL{AllowSubscribe: allow, IssuedAllowSubscribe: allow, UpdatedAt: old.UpdatedAt, IssuedAt: max(old.IssuedAt, 1)}, nil
}

// channelsOf turns the subscribe permissions of a credential of space ("" means any
// space) into the channel patterns it may read: cotal.<space>.chat.*.*.<pattern> is
// <pattern>, and a subject that covers every chat subject of the space is ">". Other
// subjects read no channel.
func channelsOf(space string, subs []string) []string {
	out := []string{}
	for _, s := range subs {
		t := strings.Split(s, ".")
		inSpace := len(t) >= 2 && t[0] == protocol.Root && (space == "" || t[1] == space)
		switch {
		case s == ">", s == protocol.Root+".>",
			inSpace && len(t) == 3 && t[2] == ">",
			inSpace && len(t) == 4 && t[2] == string(protocol.KindChat) && t[3] == ">":
			out = append(out, ">")
		case inSpace && len(t) >= 6 && t[2] == string(protocol.KindChat) && t[3] == "*" && t[4] == "*":
			if ch := strings.Join(t[5:], "."); protocol.CheckChannelPattern(ch) == nil {
				out = append(out, ch)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// parseMemberKey reads an ACL key <owner>.<actor>.<uid>.
func parseMemberKey(k string) (member, bool) {
	i := strings.LastIndexByte(k, '.')
	if i < 0 {
		return member{}, false
	}
	p, err := protocol.ParsePrincipal(k[:i])
	if err != nil || !protocol.ValidLifecycleUID(k[i+1:]) {
		return member{}, false
	}
	return member{p: p, uid: k[i+1:]}, true
}

// member is one member incarnation.
type member struct {
	p   protocol.Principal
	uid string
}

func (m member) key() string { return protocol.MemberKey(m.p, m.uid) }

// errCredential is wrapped by every refusal of a presented credential.
var errCredential = errors.New("credential refused")

// commitAttempts bounds the compare-and-set rounds of one ACL write (as the reference).
const commitAttempts = 5

// CommitACL writes the read ACL of member (p, uid) to kv, the space's ACL bucket, in the
// reference's form (commitAcl): allowSubscribe and issuedAllowSubscribe the channel
// patterns allow, revision one more than the row it replaces, by compare-and-set. Whoever
// mints the member's credential calls it, with a connection allowed to write the bucket.
// An unchanged row is left as it is.
func CommitACL(ctx context.Context, kv jetstream.KeyValue, p protocol.Principal, uid string, allow []string, now time.Time) error {
	return commitACL(ctx, kv, p, uid, allow, 0, now)
}

// commitACL is CommitACL; issuedAt > 0 marks a row taken from a presented credential of
// that iat, which refuses to replace a row taken from a credential issued later.
func commitACL(ctx context.Context, kv jetstream.KeyValue, p protocol.Principal, uid string, allow []string, issuedAt int64, now time.Time) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("record read ACL: %w", err)
	}
	if !protocol.ValidLifecycleUID(uid) {
		return fmt.Errorf("record read ACL of %s: lifecycle uid %q is not 26 to 32 of a-z 0-9", p, uid)
	}
	allow = slices.Clone(allow)
	if allow == nil {
		allow = []string{}
	}
	for _, ch := range allow {
		if err := protocol.CheckChannelPattern(ch); err != nil {
			return fmt.Errorf("record read ACL of %s: %w", p, err)
		}
	}
	key := protocol.MemberKey(p, uid)
	for range commitAttempts {
		row := ACL{AllowSubscribe: allow, IssuedAllowSubscribe: allow, Revision: 1, UpdatedAt: now.UnixMilli(), IssuedAt: issuedAt}
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read ACL %s: %w", key, err)
		default:
			rev = e.Revision()
			if old, derr := decodeACL("", e.Value()); derr == nil {
				if issuedAt > 0 && old.IssuedAt > issuedAt {
					return fmt.Errorf("%w: a credential of %s issued later was presented before; present that one", errCredential, p)
				}
				if slices.Equal(old.AllowSubscribe, allow) && slices.Equal(old.IssuedAllowSubscribe, allow) && old.Revision > 0 && old.IssuedAt == issuedAt {
					return nil
				}
				row.Revision = old.Revision + 1
			}
		}
		b, _ := json.Marshal(row) // strings and numbers always encode
		if rev == 0 {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return fmt.Errorf("write ACL %s: %w", key, err)
		}
	}
	return fmt.Errorf("write ACL %s: %d concurrent writes in a row; try again", key, commitAttempts)
}

// isWrongSequence reports a compare-and-set lost to another writer.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// verifier checks the credentials members present on the delivery rail (a Go extension:
// the Cotal-Jwt and Cotal-Sig headers). A verified credential refreshes the member's ACL
// row, so a credential minted before the row was written at mint still works.
type verifier struct {
	account string       // the space's account: every member credential is issued for it
	issuers []string     // keys trusted to sign member credentials: the account and its signing key
	cache   *claimsCache // credentials that passed every check of a request; nil remembers none
}

// verify checks that token is a user JWT of this space's account, signed by a trusted key,
// not expired, naming the principal p that sent the request on subject, with a lifecycle
// uid; and that sig is its user key's signature over subject, a newline and body. It
// returns the member incarnation and the token's claims (the channels its credential may
// read, its iat). A token remembered (remember) is not decoded again: only what can change
// between requests (the clock, the requester, the signature) is checked.
func (v *verifier) verify(space, token, sig, subject string, body []byte, p protocol.Principal, now time.Time) (member, *claims, error) {
	cl, ok := (*claims)(nil), false
	if v.cache != nil {
		cl, ok = v.cache.get(token, now.Unix())
	}
	if !ok {
		var err error
		if cl, err = v.decode(space, token); err != nil {
			return member{}, nil, err
		}
	}
	fail := func(format string, args ...any) (member, *claims, error) {
		return member{}, nil, fmt.Errorf("%w: "+format, append([]any{errCredential}, args...)...)
	}
	if cl.expires > 0 && now.Unix() >= cl.expires {
		return fail("it expired at %s", time.Unix(cl.expires, 0).UTC().Format(time.RFC3339))
	}
	if cl.notBefore > 0 && now.Unix() < cl.notBefore {
		return fail("it is not valid before %s", time.Unix(cl.notBefore, 0).UTC().Format(time.RFC3339))
	}
	if cl.principal != p {
		return fail("it names %s, not the requester %s", cl.principal, p)
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fail("signature: %v", err)
	}
	if err := cl.user.Verify(protocol.SignedBytes(subject, body), raw); err != nil {
		return fail("the signature is not its user key's")
	}
	return member{p: p, uid: cl.uid}, cl, nil
}

// remember keeps cl for the token's next requests; call it only once a request presenting
// it passed every check.
func (v *verifier) remember(cl *claims, now time.Time) {
	if v.cache != nil {
		v.cache.put(cl, now.Unix())
	}
}

// decode decodes token and checks what its bytes alone decide: a user JWT signed by a
// trusted key of this space's account, with a lifecycle uid and a user key.
func (v *verifier) decode(space, token string) (*claims, error) {
	fail := func(format string, args ...any) (*claims, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{errCredential}, args...)...)
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
	cl := &claims{token: token, notBefore: uc.NotBefore, expires: uc.Expires, iat: max(uc.IssuedAt, 1),
		allow: channelsOf(space, uc.Permissions.Sub.Allow)}
	for _, tag := range uc.Tags {
		k, val, _ := strings.Cut(tag, ":")
		switch k {
		case "owner":
			cl.principal.Owner = val
		case "actor":
			cl.principal.Actor = val
		case "uid":
			cl.uid = val
		}
	}
	if !protocol.ValidLifecycleUID(cl.uid) {
		return fail("it names no lifecycle uid, so it has no hand-off durable")
	}
	if cl.user, err = nkeys.FromPublicKey(uc.Subject); err != nil {
		return fail("user key: %v", err)
	}
	return cl, nil
}

// RecordGrant stores in kv, the space's ACL bucket, the read ACL an auth callout granted
// to a connection of member (p, uid): sub is the subscribe permission of the user JWT the
// callout minted, whose channel subjects become the row's channel patterns
// (CommitACL). The auth service calls it at each grant. name and userKey are not stored
// (the reference's row has no place for them); issuedAt is the grant's time.
func RecordGrant(ctx context.Context, kv jetstream.KeyValue, p protocol.Principal, uid, name, userKey string, sub jwt.Permission, issuedAt time.Time) error {
	if err := CommitACL(ctx, kv, p, uid, channelsOf("", sub.Allow), issuedAt); err != nil {
		return fmt.Errorf("record grant of %s: %w", p, err)
	}
	return nil
}
