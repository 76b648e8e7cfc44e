package protocol

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode"
)

// OwnerLocal is the owner token of open and static-credential meshes.
const OwnerLocal = "local"

// MaxActorLength bounds an actor token.
const MaxActorLength = 64

// MaxNameLength bounds a display name (AgentCard.name).
const MaxNameLength = 128

var (
	uidRE = regexp.MustCompile(`^[a-z0-9]{26,32}$`)
)

// ValidOwner reports whether s is a principal owner: "local" or "u_" + 26 base32.
func ValidOwner(s string) bool {
	if s == OwnerLocal {
		return true
	}
	if len(s) != 28 || s[0] != 'u' || s[1] != '_' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z') && !(c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// ValidActor reports whether s is an actor token: [A-Za-z0-9_]+, at most 64 bytes.
func ValidActor(s string) bool {
	if s == "" || len(s) > MaxActorLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// MaxRoleLength bounds a role, in bytes: the same bound as an actor and a space, the other
// tokens of a subject. A role names the anycast durable svc_<role>, and JetStream refuses
// a consumer name over 255 bytes; the reference sets no bound (see docs/interop.md).
const MaxRoleLength = 64

// ErrInvalidRole reports a role that is not a canonical token of at most MaxRoleLength.
var ErrInvalidRole = errors.New("invalid role")

// CheckRole refuses a role that is not a canonical token ([A-Za-z0-9_-]) of 1 to
// MaxRoleLength bytes: every place that takes a role (a flag, a persona, a manifest, a
// credential, an anycast) checks it with this one function.
func CheckRole(role string) error {
	if len(role) > MaxRoleLength {
		return fmt.Errorf("%w %q… (%d characters): a role is at most %d characters", ErrInvalidRole, role[:20], len(role), MaxRoleLength)
	}
	if !ValidToken(role) {
		return fmt.Errorf("%w %q: use 1 to %d letters, digits, _ and - only (for example %q)", ErrInvalidRole, role, MaxRoleLength, Token(role))
	}
	return nil
}

// ValidLifecycleUID reports whether s matches the lifecycle uid grammar [a-z0-9]{26,32}.
func ValidLifecycleUID(s string) bool { return uidRE.MatchString(s) }

// Principal is the wire identity of an agent: the pair (owner, actor).
type Principal struct {
	Owner string
	Actor string
}

// String returns the dot-form "<owner>.<actor>" used in subjects, ids and KV keys.
func (p Principal) String() string { return p.Owner + "." + p.Actor }

// Dash returns the dash-form "<owner>-<actor>" used in JetStream durable names.
func (p Principal) Dash() string { return p.Owner + "-" + p.Actor }

// Validate checks both tokens fail-loud; it never rewrites them.
func (p Principal) Validate() error {
	if !ValidOwner(p.Owner) {
		return fmt.Errorf("owner %q is not a principal owner (want %q or u_ followed by 26 base32 letters)", p.Owner, OwnerLocal)
	}
	if !ValidActor(p.Actor) {
		return fmt.Errorf("actor %q is not an actor token (want 1 to %d of A-Z a-z 0-9 _)", p.Actor, MaxActorLength)
	}
	return nil
}

// ParsePrincipal parses and validates a dot-form principal.
func ParsePrincipal(s string) (Principal, error) {
	owner, actor, ok := strings.Cut(s, ".")
	if !ok {
		return Principal{}, fmt.Errorf("principal %q: want <owner>.<actor>", s)
	}
	p := Principal{Owner: owner, Actor: actor}
	if err := p.Validate(); err != nil {
		return Principal{}, fmt.Errorf("principal %q: %w", s, err)
	}
	return p, nil
}

// Token sanitises a non-identity token (space, role, bucket suffix) as the reference
// token() does: it trims white space, replaces every character outside [A-Za-z0-9_-]
// with "_", and yields "_" for an empty result. As in JavaScript, trimming follows
// String.prototype.trim and characters are UTF-16 code units, so a character outside
// the Basic Multilingual Plane becomes "__"; an invalid UTF-8 byte becomes "_". The
// mapping is lossy and must never be decoded back into a display name.
func Token(s string) string {
	s = trimJS(s)
	if s == "" {
		return "_"
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case isTokenRune(r):
			b.WriteRune(r)
		case r > 0xFFFF: // a surrogate pair in UTF-16
			b.WriteString("__")
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// trimJS trims what JavaScript's String.prototype.trim trims: white space (tab, VT, FF,
// the BOM and category Zs) and line terminators (LF, CR, U+2028, U+2029). Unlike
// strings.TrimSpace it keeps U+0085 and drops U+FEFF.
func trimJS(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		switch r {
		case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\ufeff':
			return true
		}
		return unicode.Is(unicode.Zs, r)
	})
}

// ValidToken reports whether s is already a canonical token (Token(s) == s, non-empty).
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isTokenRune(r) {
			return false
		}
	}
	return true
}

func isTokenRune(r rune) bool {
	return r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

// ErrInvalidSpace reports a space name that is not a canonical token.
var ErrInvalidSpace = errors.New("invalid space name")

// MaxSpaceLen bounds a space name, in bytes (a canonical token is ASCII, so characters).
// The name reaches file names as lowercase hex, two bytes a character (with a prefix,
// suffix and an atomic write's temp suffix, such as ".auth-service.<hex>.held.tmp-N"),
// and JetStream stream and bucket names ("OBJ_cotal_artifacts_<space>"), which must stay
// within NAME_MAX and JetStream's 255; 64 leaves room in both.
const MaxSpaceLen = 64

// CheckSpace refuses a space that is not a canonical token, naming the sanitised form,
// or that is longer than MaxSpaceLen.
func CheckSpace(space string) error {
	if len(space) > MaxSpaceLen {
		return fmt.Errorf("%w %q… (%d characters): a space name is at most %d characters", ErrInvalidSpace, space[:min(len(space), 20)], len(space), MaxSpaceLen)
	}
	if !ValidToken(space) {
		return fmt.Errorf("%w %q: use letters, digits, _ and - only (for example %q)", ErrInvalidSpace, space, Token(space))
	}
	return nil
}

// NewLifecycleUID mints a lifecycle uid: 20 random bytes (160 bits) in base36, left-padded
// with 0 to 26 characters.
func NewLifecycleUID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	s := new(big.Int).SetBytes(b).Text(36)
	return strings.Repeat("0", max(0, 26-len(s))) + s
}
