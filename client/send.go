package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Draft is the content of a message before it is addressed and sent.
type Draft struct {
	Parts     []protocol.Part
	Mentions  []string // peer names to wake; routing is unchanged
	ReplyTo   string   // id of the message this answers
	ContextID string   // conversation correlation id
}

// Text is a draft holding one text part.
func Text(s string) Draft { return Draft{Parts: []protocol.Part{protocol.TextPart(s)}} }

// Sent is what the broker stored for a sent message.
type Sent struct {
	ID     string // message id, also its Nats-Msg-Id
	Stream string
	Seq    uint64 // stream sequence
}

// Post multicasts d to a concrete channel.
func (e *Endpoint) Post(ctx context.Context, channel string, d Draft) (Sent, error) {
	if err := protocol.CheckConcreteChannel(channel); err != nil {
		return Sent{}, fmt.Errorf("post: %w", err)
	}
	m := e.Envelope(d)
	m.Channel = channel
	return e.publish(ctx, protocol.ChatSubject(e.cfg.Space, e.me, channel), m)
}

// DM sends d to one principal; it is stored in the recipient's durable inbox until acked.
func (e *Endpoint) DM(ctx context.Context, to protocol.Principal, d Draft) (Sent, error) {
	if err := to.Validate(); err != nil {
		return Sent{}, fmt.Errorf("dm: %w", err)
	}
	m := e.Envelope(d)
	m.To = to.String()
	return e.publish(ctx, protocol.InstSubject(e.cfg.Space, to, e.me), m)
}

// Ask anycasts d to role: exactly one current or future holder of the role receives it.
func (e *Endpoint) Ask(ctx context.Context, role string, d Draft) (Sent, error) {
	if !protocol.ValidToken(role) {
		return Sent{}, fmt.Errorf("ask: role %q: use letters, digits, _ and - only", role)
	}
	m := e.Envelope(d)
	m.ToService = role
	return e.publish(ctx, protocol.SvcSubject(e.cfg.Space, role, e.me), m)
}

// Envelope builds an unaddressed message from d with a fresh id, this endpoint as the
// sender and the current time. Set exactly one of Channel, To and ToService, then send it
// with PublishAsync on the matching subject.
func (e *Endpoint) Envelope(d Draft) *protocol.Message {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return &protocol.Message{
		ID: id.String(), TS: time.Now().UnixMilli(), Space: e.cfg.Space,
		From:     protocol.EndpointRef{ID: e.me.String(), Name: e.cfg.Name, Role: e.cfg.Role},
		Mentions: protocol.NormalizeMentions(d.Mentions), Parts: d.Parts,
		ReplyTo: d.ReplyTo, ContextID: d.ContextID,
	}
}

func (e *Endpoint) encode(subject string, m *protocol.Message) (*nats.Msg, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := protocol.EncodeMessage(m) // byte for byte json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	// MsgIDHeader is in canonical form already: Header.Set would only canonicalize it again.
	return &nats.Msg{Subject: subject, Data: b, Header: nats.Header{jetstream.MsgIDHeader: {m.ID}}}, nil
}

func (e *Endpoint) publish(ctx context.Context, subject string, m *protocol.Message) (Sent, error) {
	msg, err := e.encode(subject, m)
	if err != nil {
		return Sent{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	f, err := e.js.PublishMsgAsync(msg)
	if err != nil {
		return Sent{}, fmt.Errorf("send %s: %w", subject, err)
	}
	for {
		select {
		case ack := <-f.Ok():
			return Sent{ID: m.ID, Stream: ack.Stream, Seq: ack.Sequence}, nil
		case err := <-f.Err():
			return Sent{}, fmt.Errorf("send %s: %w", subject, err)
		case err := <-e.denied:
			// A refusal names its subject; another publish's refusal is not ours.
			if strings.Contains(err.Error(), `"`+subject+`"`) {
				return Sent{}, fmt.Errorf("%w: the broker refused the post to %s: your credential may not publish there", ErrRefused, subject)
			}
		case <-ctx.Done():
			return Sent{}, fmt.Errorf("send %s: %w", subject, ctx.Err())
		}
	}
}

// ErrRefused reports a message the broker refused for lack of permission.
var ErrRefused = errors.New("refused")

// PublishAsync sends an addressed message without waiting for the broker's ack; wait on
// the returned future, or on JetStream().PublishAsyncComplete() for a batch.
func (e *Endpoint) PublishAsync(subject string, m *protocol.Message) (jetstream.PubAckFuture, error) {
	msg, err := e.encode(subject, m)
	if err != nil {
		return nil, err
	}
	f, err := e.js.PublishMsgAsync(msg)
	if err != nil {
		return nil, fmt.Errorf("send %s: %w", subject, err)
	}
	return f, nil
}
