package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/bytesize"
)

// Unlimited is the value of a limit that bounds nothing.
const Unlimited = jwt.NoLimit

// limitsTag marks an account JWT whose limits cotal chose (DefaultLimits, or an
// operator's); an account minted before limits existed carries none and is unlimited.
const limitsTag = "cotal-limits:v1"

// Limits bound what one space may hold and what each connection to it may do. The first
// four are the JetStream limits of the space's account; Conns bounds the account's
// connections; Subs and Payload bound every connection of the space: they are set in the
// account JWT (the broker applies them to every connection, a credential minted before
// included) and in every user JWT the account signs. Unlimited (-1) bounds nothing; 0
// means "not set" where Limits is an override (Over), and is refused by Check.
type Limits struct {
	Storage   int64 // bytes on disk of every stream and bucket of the space, each replica counted
	Memory    int64 // bytes in memory of the space's memory streams
	Streams   int64 // streams and buckets
	Consumers int64 // consumers of every stream, durable and ephemeral
	Conns     int64 // connections to the space at once
	Subs      int64 // subscriptions of one connection
	Payload   int64 // bytes of one message
}

// DefaultLimits fit a laptop: a space holds at most 1 GiB on disk and 256 MiB in memory,
// 100 streams and 10 000 consumers (a space provisions about a dozen streams and two or
// three consumers per member), 1 000 connections, each with at most 1 000 subscriptions
// and 1 MiB messages (the broker's own bound).
func DefaultLimits() Limits {
	return Limits{
		Storage: 1 << 30, Memory: 256 << 20,
		Streams: 100, Consumers: 10_000,
		Conns: 1_000, Subs: 1_000, Payload: 1 << 20,
	}
}

// limitNames are the limits in field order, as flags, manifest keys and messages name them.
var limitNames = [...]string{"storage", "memory", "streams", "consumers", "connections", "subscriptions", "payload"}

// fields are pointers to l's limits in limitNames' order.
func (l *Limits) fields() [len(limitNames)]*int64 {
	return [...]*int64{&l.Storage, &l.Memory, &l.Streams, &l.Consumers, &l.Conns, &l.Subs, &l.Payload}
}

// isBytes reports whether the limit at index i is a size in bytes.
func isBytes(i int) bool { return i == 0 || i == 1 || i == 6 }

// Over is l with every limit l does not set (0) taken from base.
func (l Limits) Over(base Limits) Limits {
	out := l
	of, bf := out.fields(), base.fields()
	for i, p := range of {
		if *p == 0 {
			*p = *bf[i]
		}
	}
	return out
}

// Check refuses a limit that is neither positive nor Unlimited, and a payload over what a
// connection can carry (2 GiB).
func (l Limits) Check() error {
	for i, p := range l.fields() {
		switch {
		case *p == 0 || *p < Unlimited:
			return fmt.Errorf("limit %s %d: want a positive number, or unlimited", limitNames[i], *p)
		case i == 6 && *p > math.MaxInt32:
			return fmt.Errorf("limit payload %d: want at most %d bytes", *p, math.MaxInt32)
		}
	}
	return nil
}

// String lists the limits for a person: "storage 1GiB, memory 256MiB, streams 100, ...".
func (l Limits) String() string {
	var b strings.Builder
	for i, p := range l.fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(limitNames[i] + " ")
		switch {
		case *p == Unlimited:
			b.WriteString("unlimited")
		case isBytes(i):
			b.WriteString(FormatSize(*p))
		default:
			b.WriteString(strconv.FormatInt(*p, 10))
		}
	}
	return b.String()
}

// sizeUnits are the suffixes ParseSize reads, longest first.
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// ParseSize reads a byte size: a whole number with an optional unit (B, K/KiB, M/MiB,
// G/GiB, T/TiB are powers of 1024; KB, MB, GB, TB powers of 1000), or "unlimited"
// (Unlimited). It refuses zero, negatives and fractions.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return Unlimited, nil
	}
	factor, unit := int64(1), ""
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, factor, unit = strings.TrimSpace(num), u.factor, u.suffix
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 || err == nil && n > math.MaxInt64/factor {
		return 0, fmt.Errorf("size %q: too large: the largest is %d%s, or unlimited", s, math.MaxInt64/factor, unit)
	}
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive whole number with an optional unit (512MiB, 2GiB), or unlimited", s)
	}
	return n * factor, nil
}

// ParseCount reads a positive whole number, or "unlimited" (Unlimited).
func ParseCount(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return Unlimited, nil
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		return 0, fmt.Errorf("%q: too large: the largest is %d, or unlimited", s, int64(math.MaxInt64))
	}
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive whole number, or unlimited", s)
	}
	return n, nil
}

// FormatSize writes a byte size in the largest binary unit that divides it: 1GiB, 512MiB,
// 1500B; Unlimited is "unlimited".
func FormatSize(n int64) string {
	if n == Unlimited {
		return "unlimited"
	}
	return bytesize.Format(n)
}

// LimitNames are the names of the limits in field order.
func LimitNames() []string { return limitNames[:] }

// Set sets the limit called name (LimitNames) from its text: a size for storage, memory
// and payload (ParseSize), a count for the others (ParseCount).
func (l *Limits) Set(name, value string) error {
	for i, p := range l.fields() {
		if limitNames[i] != name {
			continue
		}
		parse := ParseCount
		if isBytes(i) {
			parse = ParseSize
		}
		n, err := parse(value)
		if err != nil {
			return fmt.Errorf("limit %s: %w", name, err)
		}
		*p = n
		return nil
	}
	return fmt.Errorf("limit %q: want one of %s", name, strings.Join(limitNames[:], ", "))
}

// applyAccount writes l into an account's claims and tags them as cotal's.
func (l Limits) applyAccount(ac *jwt.AccountClaims) {
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		DiskStorage: l.Storage, MemoryStorage: l.Memory,
		Streams: l.Streams, Consumer: l.Consumers,
	}
	ac.Limits.Conn = l.Conns
	ac.Limits.Subs, ac.Limits.Payload = l.Subs, l.Payload
	if !ac.Tags.Contains(limitsTag) {
		ac.Tags.Add(limitsTag)
	}
}

// accountLimits reads the limits of an account's claims; set is false for an account
// whose limits cotal never chose (one made before limits existed).
func accountLimits(ac *jwt.AccountClaims) (l Limits, set bool) {
	js := ac.Limits.JetStreamLimits
	l = Limits{
		Storage: js.DiskStorage, Memory: js.MemoryStorage, Streams: js.Streams, Consumers: js.Consumer,
		Conns: ac.Limits.Conn, Subs: ac.Limits.Subs, Payload: ac.Limits.Payload,
	}
	return l, ac.Tags.Contains(limitsTag)
}

// UserLimits are the per-connection limits (subscriptions, payload) of every user JWT of
// the space, for a signer outside this package (the auth callout's users). An account
// whose limits cotal never chose bounds nothing.
func (a *Account) UserLimits() jwt.NatsLimits {
	nl := jwt.NatsLimits{Subs: Unlimited, Data: Unlimited, Payload: Unlimited}
	if a.limitsSet {
		nl.Subs, nl.Payload = a.limits.Subs, a.limits.Payload
	}
	return nl
}

// Limits are the limits in the account's JWT; set is false for an account made before
// cotal set limits (unbounded until SetLimits gives it some).
func (a *Account) Limits() (l Limits, set bool) { return a.limits, a.limitsSet }

// SetLimits gives space's account the limits l: it re-signs the account JWT with the same
// keys (every credential minted so far stays valid) and rewrites account.<spacekey>.json
// atomically; changed is false when the JWT already carried l. A running broker enforces
// the new limits once the JWT is pushed to it (PushAccount) or the broker restarts with it
// preloaded. The account is created first when the space has none.
func (c *Chain) SetLimits(space string, l Limits) (acct *Account, changed bool, err error) {
	if err := l.Check(); err != nil {
		return nil, false, fmt.Errorf("space %q limits: %w", space, err)
	}
	a, err := c.account(space, true)
	if err != nil {
		return nil, false, err
	}
	if cur, set := a.Limits(); set && cur == l {
		return a, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	path := c.accountPath(space)
	repair := fmt.Sprintf("restore it from a backup, or move it aside to give space %q a new account (every credential minted for the space stops working)", space)
	var af accountFile
	if err := readFile(path, &af, repair); err != nil {
		return nil, false, fmt.Errorf("space %q limits: %w", space, err)
	}
	ac, err := jwt.DecodeAccountClaims(af.JWT)
	if err != nil {
		return nil, false, fmt.Errorf("space %q limits: %w", space, corrupt(path, "account jwt: "+err.Error(), repair))
	}
	l.applyAccount(ac)
	if af.JWT, err = ac.Encode(c.signer); err != nil {
		return nil, false, fmt.Errorf("space %q limits: account jwt: %w", space, err)
	}
	loaded, err := c.loadAccount(space, path, af, repair)
	if err != nil {
		return nil, false, fmt.Errorf("space %q limits: %w", space, err)
	}
	if err := replaceFile(path, af); err != nil {
		return nil, false, fmt.Errorf("space %q limits: %w", space, err)
	}
	c.accounts[space] = loaded
	return loaded, true, nil
}

// replaceFile replaces the trust file at path with v, atomically (0600).
func replaceFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), fileMode)
}

// Text is the limit called name (LimitNames) as Set reads it (1GiB, 100, unlimited), and
// "" when l does not set it.
func (l Limits) Text(name string) string {
	for i, p := range l.fields() {
		switch {
		case limitNames[i] != name || *p == 0:
		case *p == Unlimited:
			return "unlimited"
		case isBytes(i):
			return FormatSize(*p)
		default:
			return strconv.FormatInt(*p, 10)
		}
	}
	return ""
}
