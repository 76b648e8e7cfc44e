package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// Root is the first token of every Cotal subject.
const Root = "cotal"

// Kind is the messaging-plane subject kind (token 2).
type Kind string

// Messaging-plane kinds.
const (
	KindChat Kind = "chat" // multicast to a channel
	KindInst Kind = "inst" // unicast to one principal
	KindSvc  Kind = "svc"  // anycast to a role
	KindLive Kind = "live" // plane liveness probe
)

// Liveness planes answered on the live rail.
const (
	PlaneManager  = "manager"
	PlaneDelivery = "delivery"
)

// Subject is a parsed messaging-plane subject. Which of Channel, Recipient, Role and Plane
// is set depends on Kind.
type Subject struct {
	Space     string
	Kind      Kind
	Sender    Principal // the publisher, whose tokens the broker pins
	Channel   string    // chat: the channel, tokens 5 and up
	Recipient Principal // inst: the addressee
	Role      string    // svc: the role
	Plane     string    // live: manager or delivery
}

// ErrMalformedSubject is wrapped by every ParseSubject failure.
var ErrMalformedSubject = errors.New("malformed subject")

// ChatSubject is where sender posts to channel: cotal.<space>.chat.<o>.<a>.<channel>.
func ChatSubject(space string, sender Principal, channel string) string {
	return join(space, KindChat, sender.Owner, sender.Actor, channel)
}

// InstSubject is where sender writes to recipient: cotal.<space>.inst.<rO>.<rA>.<sO>.<sA>.
func InstSubject(space string, recipient, sender Principal) string {
	return join(space, KindInst, recipient.Owner, recipient.Actor, sender.Owner, sender.Actor)
}

// SvcSubject is where sender asks role: cotal.<space>.svc.<role>.<o>.<a>.
func SvcSubject(space, role string, sender Principal) string {
	return join(space, KindSvc, role, sender.Owner, sender.Actor)
}

// LiveSubject is where sender probes a plane: cotal.<space>.live.<plane>.<o>.<a>.
func LiveSubject(space, plane string, sender Principal) string {
	return join(space, KindLive, plane, sender.Owner, sender.Actor)
}

// ChannelFilter is the read subscription for a channel (which may hold wildcards).
func ChannelFilter(space, channel string) string {
	return join(space, KindChat, "*", "*", channel)
}

// ChatAll is the observer tap over every channel of a space.
func ChatAll(space string) string { return join(space, KindChat, ">") }

// DMFilter selects every unicast addressed to me.
func DMFilter(space string, me Principal) string {
	return join(space, KindInst, me.Owner, me.Actor, ">")
}

// InstAll selects every unicast of a space.
func InstAll(space string) string { return join(space, KindInst, ">") }

// RoleFilter selects every anycast to role.
func RoleFilter(space, role string) string { return join(space, KindSvc, role, ">") }

// SvcAll selects every anycast of a space.
func SvcAll(space string) string { return join(space, KindSvc, ">") }

func join(space string, kind Kind, rest ...string) string {
	return Root + "." + space + "." + string(kind) + "." + strings.Join(rest, ".")
}

// String rebuilds the subject; for anything ParseSubject accepted it returns its input.
func (s Subject) String() string {
	switch s.Kind {
	case KindChat:
		return ChatSubject(s.Space, s.Sender, s.Channel)
	case KindInst:
		return InstSubject(s.Space, s.Recipient, s.Sender)
	case KindSvc:
		return SvcSubject(s.Space, s.Role, s.Sender)
	case KindLive:
		return LiveSubject(s.Space, s.Plane, s.Sender)
	}
	return ""
}

// ParseSubject is the only authority on subject layout. It checks the root, the kind and
// its arity, and that every token is a concrete token (no wildcard, nothing empty); it
// accepts only canonical input, so a parsed subject rebuilds to the same string. It does
// not check that the sender owner is a principal owner: receivers do that (Receive).
func ParseSubject(subject string) (Subject, error) {
	// The tokens are walked in place, not split into a slice: this runs for every message
	// received. lead holds the first tokens, enough for every kind but a chat subject's
	// channel, which is the rest of the subject.
	var lead [7]string
	n := strings.Count(subject, ".") + 1
	if first, _, _ := strings.Cut(subject, "."); n < 3 || first != Root {
		return Subject{}, fmt.Errorf("%w %q: want %s.<space>.<kind> and the tokens of the kind", ErrMalformedSubject, subject, Root)
	}
	channel := "" // the subject from the sixth token on
	rest := subject
	for i := range n {
		if i == 5 {
			channel = rest
		}
		tok, after, _ := strings.Cut(rest, ".")
		if !ValidToken(tok) {
			return Subject{}, fmt.Errorf("%w %q: token %d %q is not a concrete token", ErrMalformedSubject, subject, i, tok)
		}
		if i < len(lead) {
			lead[i] = tok
		}
		rest = after
	}
	t := lead[:min(n, len(lead))]
	s := Subject{Space: t[1], Kind: Kind(t[2])}
	arity := func(ok bool, want string) error {
		if !ok {
			return fmt.Errorf("%w %q: a %s subject is %s", ErrMalformedSubject, subject, s.Kind, want)
		}
		return nil
	}
	var err error
	switch s.Kind {
	case KindChat:
		if err = arity(n >= 6, "cotal.<space>.chat.<owner>.<actor>.<channel...>"); err == nil {
			s.Sender = Principal{t[3], t[4]}
			s.Channel = channel
		}
	case KindInst:
		if err = arity(n == 7, "cotal.<space>.inst.<rOwner>.<rActor>.<sOwner>.<sActor>"); err == nil {
			s.Recipient = Principal{t[3], t[4]}
			s.Sender = Principal{t[5], t[6]}
		}
	case KindSvc:
		if err = arity(n == 6, "cotal.<space>.svc.<role>.<owner>.<actor>"); err == nil {
			s.Role = t[3]
			s.Sender = Principal{t[4], t[5]}
		}
	case KindLive:
		if err = arity(n == 6 && (t[3] == PlaneManager || t[3] == PlaneDelivery), "cotal.<space>.live.<manager|delivery>.<owner>.<actor>"); err == nil {
			s.Plane = t[3]
			s.Sender = Principal{t[4], t[5]}
		}
	default:
		err = fmt.Errorf("%w %q: kind %q is not chat, inst, svc or live", ErrMalformedSubject, subject, t[2])
	}
	if err != nil {
		return Subject{}, err
	}
	return s, nil
}
