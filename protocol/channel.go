package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// MaxChannelLength bounds a channel name.
const MaxChannelLength = 4096

// ErrInvalidChannel reports a channel name that cannot be used where it was given.
var ErrInvalidChannel = errors.New("invalid channel")

// NormalizeChannel builds a channel name from free text: empty segments are dropped,
// each remaining dot-separated segment is sanitised with Token, and a whole "*" segment
// and a final ">" segment are kept. It fails when nothing is left, when ">" is not the
// last segment (rather than quietly rewriting it to "_"), or when the result is too long.
func NormalizeChannel(s string) (string, error) {
	var segs []string
	for _, seg := range strings.Split(s, ".") {
		if seg = trimJS(seg); seg != "" {
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return "", fmt.Errorf("%w %q: it has no segments", ErrInvalidChannel, s)
	}
	for i, seg := range segs {
		switch {
		case seg == ">" && i != len(segs)-1:
			return "", fmt.Errorf("%w %q: \">\" may only be the last segment", ErrInvalidChannel, s)
		case seg == "*", seg == ">":
		default:
			segs[i] = Token(seg)
		}
	}
	ch := strings.Join(segs, ".")
	if len(ch) > MaxChannelLength {
		return "", fmt.Errorf("%w: %d bytes is longer than %d", ErrInvalidChannel, len(ch), MaxChannelLength)
	}
	return ch, nil
}

// CheckChannelPattern validates a channel used in policy (ACLs, join targets): every
// segment is [A-Za-z0-9_-]+, "*", or a final ">", with no empty segments. Nothing is
// rewritten, so "foo/bar" is refused instead of quietly granting "foo_bar".
func CheckChannelPattern(ch string) error {
	if ch == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidChannel)
	}
	if len(ch) > MaxChannelLength {
		return fmt.Errorf("%w: %d bytes is longer than %d", ErrInvalidChannel, len(ch), MaxChannelLength)
	}
	segs := strings.Split(ch, ".")
	for i, seg := range segs {
		switch {
		case seg == "*":
		case seg == ">":
			if i != len(segs)-1 {
				return fmt.Errorf("%w %q: \">\" may only be the last segment", ErrInvalidChannel, ch)
			}
		case !ValidToken(seg):
			return fmt.Errorf("%w %q: segment %d %q must be letters, digits, _ or - (or a whole * or final >)", ErrInvalidChannel, ch, i+1, seg)
		}
	}
	return nil
}

// CheckConcreteChannel validates a channel used as a publish target: a policy-valid name
// with no wildcard segments.
func CheckConcreteChannel(ch string) error {
	if err := CheckChannelPattern(ch); err != nil {
		return err
	}
	for _, seg := range strings.Split(ch, ".") {
		if seg == "*" || seg == ">" {
			return fmt.Errorf("%w %q: a post needs a concrete channel, without * or >", ErrInvalidChannel, ch)
		}
	}
	return nil
}

// ChannelMatches reports whether the concrete channel ch is covered by pattern, using
// NATS rules: "*" matches one segment, a final ">" one or more.
func ChannelMatches(pattern, ch string) bool {
	ps, cs := strings.Split(pattern, "."), strings.Split(ch, ".")
	for i, p := range ps {
		if p == ">" {
			return len(cs) > i
		}
		if i >= len(cs) || (p != "*" && p != cs[i]) {
			return false
		}
	}
	return len(ps) == len(cs)
}

// ChannelCovers reports whether pattern p matches every channel that pattern q matches,
// with NATS rules ("*" one segment, a final ">" one or more). A concrete q is covered
// exactly when p matches it.
func ChannelCovers(p, q string) bool {
	ps, qs := strings.Split(p, "."), strings.Split(q, ".")
	for i, pt := range ps {
		if pt == ">" {
			return i < len(qs)
		}
		if i >= len(qs) {
			return false
		}
		switch qt := qs[i]; {
		case qt == ">":
			return false // q reaches deeper than p can
		case pt == "*":
		case qt == "*" || pt != qt:
			return false
		}
	}
	return len(ps) == len(qs)
}

// ChannelCovered reports whether one of patterns covers ch (see ChannelCovers).
func ChannelCovered(patterns []string, ch string) bool {
	for _, p := range patterns {
		if ChannelCovers(p, ch) {
			return true
		}
	}
	return false
}
