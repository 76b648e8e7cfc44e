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
	// ID is the message id; "" means a fresh one. A caller that must retry a send whose
	// outcome it does not know (a timeout, a lost connection) sets it once, for example
	// to NewID(), and sends the same Draft again: the broker keeps one copy of an id
	// within the stream's duplicate window (2 minutes), and Sent.Duplicate reports a
	// retry of a send that was in fact stored.
	ID string
}

// NewID returns a fresh message id (a UUIDv7, so ids sort by creation time).
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return id.String()
}

// maxIDLength bounds a caller's message id.
const maxIDLength = 128

// CheckID accepts a caller's message id: empty (a fresh one is made) or 1 to 128
// printable ASCII characters without spaces, so it travels unchanged in the Nats-Msg-Id
// header.
func CheckID(id string) error {
	if len(id) > maxIDLength {
		return fmt.Errorf("message id %q: want at most %d characters", id[:16]+"…", maxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("message id %q: use printable ASCII without spaces (a UUID from client.NewID fits)", id)
		}
	}
	return nil
}

// Text is a draft holding one text part.
func Text(s string) Draft { return Draft{Parts: []protocol.Part{protocol.TextPart(s)}} }

// Sent is what the broker stored for a sent message.
type Sent struct {
	ID     string // message id, also its Nats-Msg-Id
	Stream string
	Seq    uint64 // stream sequence
	// Duplicate reports that the broker already held a message with this id (a retry of
	// a send that was stored, the caller's or the send's own resend after a lost ack):
	// Seq is the stored copy's, and nothing new was stored.
	Duplicate bool
}

// Post multicasts d to a concrete channel.
func (e *Endpoint) Post(ctx context.Context, channel string, d Draft) (Sent, error) {
	if err := protocol.CheckConcreteChannel(channel); err != nil {
		return Sent{}, fmt.Errorf("post: %w", err)
	}
	if err := CheckID(d.ID); err != nil {
		return Sent{}, fmt.Errorf("post: %w", err)
	}
	m := e.Envelope(d)
	m.Channel = channel
	return e.publish(ctx, protocol.ChatSubject(e.cfg.Space, e.me, channel), m)
}

// DM sends d to one principal; it is stored in the recipient's durable inbox until acked.
// A principal that has no inbox on the space (it never joined, and none was provisioned
// for it) is refused with ErrNoInbox before anything is sent: its first join would start
// its inbox after the message, so it would never read it.
func (e *Endpoint) DM(ctx context.Context, to protocol.Principal, d Draft) (Sent, error) {
	if err := to.Validate(); err != nil {
		return Sent{}, fmt.Errorf("dm: %w", err)
	}
	if err := CheckID(d.ID); err != nil {
		return Sent{}, fmt.Errorf("dm: %w", err)
	}
	if err := e.checkInbox(ctx, to); err != nil {
		return Sent{}, fmt.Errorf("dm %s: %w", to, err)
	}
	m := e.Envelope(d)
	m.To = to.String()
	return e.publish(ctx, protocol.InstSubject(e.cfg.Space, to, e.me), m)
}

// Ask anycasts d to role: exactly one current or future holder of the role receives it.
func (e *Endpoint) Ask(ctx context.Context, role string, d Draft) (Sent, error) {
	if err := protocol.CheckRole(role); err != nil {
		return Sent{}, fmt.Errorf("ask: %w", err)
	}
	if err := CheckID(d.ID); err != nil {
		return Sent{}, fmt.Errorf("ask: %w", err)
	}
	m := e.Envelope(d)
	m.ToService = role
	return e.publish(ctx, protocol.SvcSubject(e.cfg.Space, role, e.me), m)
}

// Envelope builds an unaddressed message from d with its id (a fresh one when d.ID is
// empty), this endpoint as the sender and the current time. Set exactly one of Channel,
// To and ToService, then send it with PublishAsync on the matching subject.
func (e *Endpoint) Envelope(d Draft) *protocol.Message {
	// Small enough to inline, so a message that is only encoded and sent stays on the
	// caller's stack (neither the encoder nor PublishAsync keeps it).
	m := e.envelope(d)
	return &m
}

func (e *Endpoint) envelope(d Draft) protocol.Message {
	id := d.ID
	if id == "" {
		id = NewID()
	}
	return protocol.Message{
		ID: id, TS: time.Now().UnixMilli(), Space: e.cfg.Space,
		From:     protocol.EndpointRef{ID: e.meID, Name: e.cfg.Name, Role: e.cfg.Role},
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

// Send retries: a publish whose ack does not come within sendAttempt, or that no stream
// answered (a broker restarting), is sent again with the same message, so the broker's
// duplicate window keeps one copy. Retries stop after sendRetrySpan, well inside the
// 2-minute window, or when ctx ends; a ctx without a deadline is bounded by sendTimeout.
const (
	sendAttempt   = 5 * time.Second
	sendBackoff   = 250 * time.Millisecond
	sendRetrySpan = time.Minute
	sendTimeout   = 10 * time.Second
)

func (e *Endpoint) publish(ctx context.Context, subject string, m *protocol.Message) (Sent, error) {
	msg, err := e.encode(subject, m)
	if err != nil {
		return Sent{}, err
	}
	start := time.Now()
	// One timer serves every wait of the send (an attempt's ack, a backoff, the bound of
	// a ctx without a deadline), not a context and a timer of their own per send.
	var w sendWait
	defer w.stop()
	if _, ok := ctx.Deadline(); !ok {
		w.limit = start.Add(sendTimeout)
	}
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 && time.Since(start) > sendRetrySpan {
			return Sent{}, fmt.Errorf("send %s: id %s: no ack after %s of retries: %w", subject, m.ID, sendRetrySpan, last)
		}
		f, err := e.js.PublishMsgAsync(msg)
		if err != nil {
			return Sent{}, fmt.Errorf("send %s: %w", subject, err)
		}
		sent, retry, err := e.awaitAck(ctx, &w, subject, m.ID, f)
		if !retry {
			return sent, err
		}
		last = err
		e.log.Debug("send retried with the same id", "subject", subject, "id", m.ID, "err", err)
	}
}

// sendWait times the waits of one send on one timer, made at the first wait.
type sendWait struct {
	timer *time.Timer
	limit time.Time // when the send gives up, for a ctx without a deadline; zero for none
}

// arm sets the timer to d, or to the limit when that comes first (bounded).
func (w *sendWait) arm(d time.Duration) (bounded bool) {
	if !w.limit.IsZero() {
		if left := time.Until(w.limit); left <= d {
			d, bounded = max(left, 0), true
		}
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	return bounded
}

// stop stops the timer, if one was made.
func (w *sendWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// awaitAck waits for f's ack; retry means the outcome is unknown or transient and the
// same message may be sent again.
func (e *Endpoint) awaitAck(ctx context.Context, w *sendWait, subject, id string, f jetstream.PubAckFuture) (sent Sent, retry bool, err error) {
	bounded := w.arm(sendAttempt)
	for {
		select {
		case ack := <-f.Ok():
			return Sent{ID: id, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, false, nil
		case err := <-f.Err():
			if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
				return Sent{}, false, e.sendFailed(ctx, subject, err)
			}
			bounded := w.arm(sendBackoff) // no stream answered: give a restarting broker a moment
			select {
			case <-w.timer.C:
				if bounded {
					return Sent{}, false, fmt.Errorf("send %s: id %s: %w (last: %v)", subject, id, context.DeadlineExceeded, err)
				}
				return Sent{}, true, err
			case <-ctx.Done():
				return Sent{}, false, fmt.Errorf("send %s: id %s: %w (last: %v)", subject, id, ctx.Err(), err)
			}
		case err := <-e.denied:
			// A refusal names its subject; another publish's refusal is not ours.
			if strings.Contains(err.Error(), `"`+subject+`"`) {
				return Sent{}, false, fmt.Errorf("%w: the broker refused the post to %s: your credential may not publish there", ErrRefused, subject)
			}
		case <-w.timer.C:
			if bounded {
				return Sent{}, false, fmt.Errorf("send %s: id %s: %w", subject, id, context.DeadlineExceeded)
			}
			return Sent{}, true, fmt.Errorf("no ack within %s", sendAttempt)
		case <-ctx.Done():
			return Sent{}, false, fmt.Errorf("send %s: id %s: %w", subject, id, ctx.Err())
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
