// Package mgrclient asks the agent manager (package manager, `cotal supervise`) over its
// control rails, for the CLI and for agents' MCP tools: Go's ctl.manager rails (Client)
// and the reference's endpoint rails ep.*.manager (EPCaller), whose grammar, envelopes and
// command contracts live here for the manager to serve. It imports no server code.
package mgrclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// ErrNoManager is returned when no manager answers on the space (no responders).
var ErrNoManager = errors.New("no agent manager serves this space")

// CodeDenied is the Code of a refusal for want of permission, by the manager or by the
// broker.
const CodeDenied = protocol.MgrCodeDenied

// Error is a refusal the manager answered with (or the broker's, Code CodeDenied).
type Error struct {
	Code    string // one of the protocol.MgrCode* constants
	Message string
	Broker  bool // the broker refused the request: the manager never saw it
}

func (e *Error) Error() string { return e.Message }

// Client asks the manager of Space as Caller over NC. Operator picks the operator rail
// (manager) over the agent rail (manager-agent). For the operator, when nobody answers
// on Go's rail but a reference manager serves the space's endpoint rails, it asks that
// one in the reference's contract instead (refmgr.go); Go's rail is asked first on every
// call, so a Go manager started later is found.
type Client struct {
	NC       *nats.Conn
	Space    string
	Caller   protocol.Principal
	Operator bool

	mu  sync.Mutex
	uid string               // this client's lifecycle uid on the ep rails
	due map[string]time.Time // settle deadlines of the spawns it asked a reference manager
}

func (c *Client) service() string {
	if c.Operator {
		return protocol.ServiceManager
	}
	return protocol.ServiceManagerAgent
}

// Subject is the request subject of op for this caller.
func (c *Client) Subject(op string) string {
	return protocol.MgrSubject(c.Space, c.service(), c.Caller, op)
}

// Call asks op with args and decodes the answer's data into out (nil ignores it). It
// fails with ErrNoManager when nobody serves, *Error when the manager refused.
func (c *Client) Call(ctx context.Context, op string, args, out any) error {
	return c.CallAt(ctx, op, nats.NewInbox()[len("_INBOX."):], args, out)
}

// CallAt is Call with the reply nonce given (an attach session). Go's ctl rail is asked
// first; when nobody serves it, the reference's endpoint rails.
func (c *Client) CallAt(ctx context.Context, op, nonce string, args, out any) error {
	err := c.callCtl(ctx, op, nonce, args, out)
	if !errors.Is(err, ErrNoManager) || !c.Operator {
		// An agent has no grant on the ep rails (Go mints none): asking there would only
		// draw a broker refusal on its connection.
		return err
	}
	answered, rerr := c.callRef(ctx, op, args, out)
	if !answered {
		return err
	}
	return rerr
}

// callCtl asks op on Go's ctl.manager rail.
func (c *Client) callCtl(ctx context.Context, op, nonce string, args, out any) error {
	body, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("manager %s: encode: %w", op, err)
	}
	subj := c.Subject(op)
	reply := subj + "." + protocol.ReplyToken + "." + nonce
	sub, err := c.NC.SubscribeSync(reply)
	if err != nil {
		return fmt.Errorf("manager %s: %w", op, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NC.PublishMsg(&nats.Msg{Subject: subj, Reply: reply, Data: body}); err != nil {
		return fmt.Errorf("manager %s: %w", op, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
	}
	// The broker refuses a request the caller's credential may not publish (or a reply
	// subject it may not read) asynchronously, ahead of the answer to a flush: the
	// refusal is told at once instead of waiting out the deadline.
	if err := c.NC.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("manager %s: %w", op, err)
	}
	if last := c.NC.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) &&
		(strings.Contains(last.Error(), `"`+subj+`"`) || strings.Contains(last.Error(), `"`+reply+`"`)) {
		why := "its credential may not use the manager's agent rail (only a persona with capabilities: [spawn] may; ask the operator)"
		if c.Operator {
			why = "its credential may not use the manager's operator rail (only the project's own identity may: run the command in the project, without --creds)"
		}
		return &Error{Code: CodeDenied, Broker: true, Message: fmt.Sprintf("the broker refused %s's request to %s: %s", c.Caller, op, why)}
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				return ErrNoManager
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("manager %s: no answer (is a manager running? cotal status): %w", op, err)
			}
			return fmt.Errorf("manager %s: %w", op, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			return ErrNoManager
		}
		if m.Header.Get(protocol.MgrTTYHeader) != "" {
			continue // an attach frame ahead of the answer
		}
		return decodeReply(op, m.Data, out)
	}
}

func decodeReply(op string, b []byte, out any) error {
	var r protocol.MgrReply
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("manager %s: answer: %w", op, err)
	}
	if !r.OK {
		return &Error{Code: r.Code, Message: r.Error}
	}
	if out == nil || len(r.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		return fmt.Errorf("manager %s: answer data: %w", op, err)
	}
	return nil
}
