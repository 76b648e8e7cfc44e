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
// from.id equals the subject's sender. The delivery kind comes from the subject, never
// the payload.
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
	return Received{Subject: s, Kind: kind, Message: m}, nil
}

// is reports whether id is p's dot-form, p.String(), without building it.
func (p Principal) is(id string) bool {
	n := len(p.Owner)
	return len(id) == n+1+len(p.Actor) && id[:n] == p.Owner && id[n] == '.' && id[n+1:] == p.Actor
}
