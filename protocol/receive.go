package protocol

import (
	"errors"
	"fmt"
)

// Reason names why a received message was rejected; rejections are permanent.
type Reason string

// Rejection reasons.
const (
	ReasonMalformedSubject Reason = "malformed-subject"
	ReasonMalformedJSON    Reason = "malformed-json"
	ReasonSenderMismatch   Reason = "sender-mismatch"
	// ReasonRouteMismatch is a message whose routing field (channel, to or toService) is
	// not the one its subject names: a channel post stored on a DM subject, say, which the
	// server can be made to write (a push consumer's deliver subject or a request's reply
	// subject, neither of which a permission reaches).
	ReasonRouteMismatch Reason = "route-mismatch"
)

// RejectError is a permanent receive anomaly: the message must be terminated, never
// redelivered.
type RejectError struct {
	Reason Reason
	Err    error
}

func (e *RejectError) Error() string { return string(e.Reason) + ": " + e.Err.Error() }

func (e *RejectError) Unwrap() error { return e.Err }

// DeliveryKind is how a message was addressed, taken from the delivering subject.
type DeliveryKind string

// Delivery kinds.
const (
	DeliveryChannel DeliveryKind = "channel"
	DeliveryDM      DeliveryKind = "dm"
	DeliveryAnycast DeliveryKind = "anycast"
)

// Received is a message that passed the receive checks.
type Received struct {
	Subject Subject
	Kind    DeliveryKind
	Message Message
}

// Receive runs the receive checks on one delivery: the subject parses as chat, inst or
// svc; its sender owner is a principal owner; the body decodes; from is present and
// from.id equals the subject's sender; the message's one routing field is the subject's
// (channel for chat, to for inst, toService for svc). The delivery kind comes from the
// subject, never the payload.
func Receive(subject string, data []byte) (Received, error) {
	s, err := ParseSubject(subject)
	if err != nil {
		return Received{}, &RejectError{ReasonMalformedSubject, err}
	}
	var kind DeliveryKind
	switch s.Kind {
	case KindChat:
		kind = DeliveryChannel
	case KindInst:
		kind = DeliveryDM
	case KindSvc:
		kind = DeliveryAnycast
	default:
		return Received{}, &RejectError{ReasonMalformedSubject, fmt.Errorf("subject %q is not a delivery subject", subject)}
	}
	if err := s.Sender.Validate(); err != nil {
		return Received{}, &RejectError{ReasonMalformedSubject, fmt.Errorf("subject %q sender: %w", subject, err)}
	}
	m, err := DecodeMessage(data)
	if errors.Is(err, errNoFrom) {
		return Received{}, &RejectError{ReasonSenderMismatch, err}
	}
	if err != nil {
		return Received{}, &RejectError{ReasonMalformedJSON, err}
	}
	if !s.Sender.is(m.From.ID) {
		return Received{}, &RejectError{ReasonSenderMismatch, fmt.Errorf("from.id %q is not the subject sender %q", m.From.ID, s.Sender)}
	}
	if err := checkRoute(s, &m); err != nil {
		return Received{}, &RejectError{ReasonRouteMismatch, err}
	}
	return Received{Subject: s, Kind: kind, Message: m}, nil
}

// checkRoute checks that m is addressed where subject s delivered it, and nowhere else.
func checkRoute(s Subject, m *Message) error {
	var field, want, got string
	switch s.Kind {
	case KindChat:
		field, want, got = "channel", s.Channel, m.Channel
		// A payload channel equal to the subject's is canonical already (ParseSubject
		// checked its every token), so normalizing it could not change it.
		if got != want {
			if n, err := NormalizeChannel(got); err == nil {
				got = n
			}
		}
	case KindInst:
		// Compared in place: the recipient's string is built only to report a mismatch.
		field, want, got = "to", m.To, m.To
		if !s.Recipient.is(got) {
			want = s.Recipient.String()
		}
	case KindSvc:
		field, want, got = "toService", s.Role, m.ToService
	}
	if got != want {
		return fmt.Errorf("%s %q arrived on subject %q, which routes to %s %q", field, got, s.String(), field, want)
	}
	routes := 0
	for _, r := range []string{m.Channel, m.To, m.ToService} {
		if r != "" {
			routes++
		}
	}
	if routes > 1 {
		return fmt.Errorf("message names %d of channel, to and toService, want one", routes)
	}
	return nil
}

// is reports whether id is p's dot-form, p.String(), without building it.
func (p Principal) is(id string) bool {
	n := len(p.Owner)
	return len(id) == n+1+len(p.Actor) && id[:n] == p.Owner && id[n] == '.' && id[n+1:] == p.Actor
}
