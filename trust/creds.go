package trust

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/protocol"
)

// Creds is what a creds file says about its holder, read from the tags Mint writes.
type Creds struct {
	Name         string
	Profile      Profile
	Principal    protocol.Principal // zero when the credential names none
	LifecycleUID string
	Role         string
	Expires      time.Time // zero: never
	JWT          string
	Seed         string
	InboxPrefix  string   // the reply-inbox prefix the holder must connect with
	SubAllow     []string // the subjects the broker lets the holder subscribe to (empty: any)
	SubDeny      []string // the subjects it refuses, over SubAllow
}

// MaySubscribe reports whether the broker lets the holder subscribe to subject, as its
// JWT's subscribe permissions say (subject may hold wildcards; it is allowed when an allow
// pattern covers it and no deny pattern overlaps it).
func (c Creds) MaySubscribe(subject string) bool {
	for _, d := range c.SubDeny {
		if subjectCovers(d, subject) || subjectCovers(subject, d) {
			return false
		}
	}
	if len(c.SubAllow) == 0 {
		return true
	}
	for _, a := range c.SubAllow {
		if subjectCovers(a, subject) {
			return true
		}
	}
	return false
}

// subjectCovers reports whether NATS subject pattern covers every subject sub matches.
func subjectCovers(pattern, sub string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(sub, ".")
	for i, p := range pt {
		if p == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		switch {
		case p == "*":
			if st[i] == ">" {
				return false
			}
		case p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// notCreds says what a file that is no creds file lacks, and where one comes from.
const notCreds = "this is not a NATS creds file: one holds a user JWT and its nkey seed, each between BEGIN and END lines; cotal mint writes one"

// ReadCreds parses a creds file. It does not verify the signature: the broker does.
func ReadCreds(b []byte) (Creds, error) {
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return Creds{}, fmt.Errorf("creds: %w (%s)", err, notCreds)
	}
	kp, err := jwt.ParseDecoratedNKey(b)
	if err != nil {
		return Creds{}, fmt.Errorf("creds: %w (%s)", err, notCreds)
	}
	seed, err := kp.Seed()
	if err != nil {
		return Creds{}, fmt.Errorf("creds: seed: %w", err)
	}
	if prefix, _, err := nkeys.DecodeSeed(seed); err != nil || prefix != nkeys.PrefixByteUser {
		return Creds{}, fmt.Errorf("creds: the seed is not a user seed")
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return Creds{}, fmt.Errorf("creds: %w", err)
	}
	c := Creds{Name: uc.Name, JWT: token, Seed: string(seed), InboxPrefix: inboxPrefix(uc.Subject),
		SubAllow: uc.Permissions.Sub.Allow, SubDeny: uc.Permissions.Sub.Deny}
	if uc.Expires > 0 {
		c.Expires = time.Unix(uc.Expires, 0)
	}
	for _, tag := range uc.Tags {
		k, v, _ := strings.Cut(tag, ":")
		switch k {
		case "owner":
			c.Principal.Owner = v
		case "actor":
			c.Principal.Actor = v
		case "uid":
			c.LifecycleUID = v
		case "role":
			c.Role = v
		case "profile":
			c.Profile = Profile(v)
		}
	}
	return c, nil
}

// Options are the nats.go options that connect as the holder of c: its JWT and seed, and
// the only reply inbox its permissions let it read.
func (c Creds) Options() []nats.Option {
	return []nats.Option{nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix)}
}
