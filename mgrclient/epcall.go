package mgrclient

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/protocol"
)

// EPCaller asks a manager on the reference's endpoint rails (ep.*.manager), as the
// reference's own callers do: it reads the answer on its own reply rail, never on a
// transport inbox. UID is the caller's lifecycle uid ([a-z0-9]{26,32}), the third token of
// its rail.
type EPCaller struct {
	NC     *nats.Conn
	Space  string
	Caller protocol.Principal
	UID    string
}

// EPCall is one request: Route (EPRouteOne unless set) with Instance for EPRouteInst;
// Mode and Target for a targeted command (Target.Owner is the mode's one subject token).
type EPCall struct {
	Route    string
	Instance string
	Command  string
	Mode     string
	Target   *EPTarget
	Args     any // nil sends none (a void command)
	Deadline time.Duration
}

// Call asks c and decodes the answer's data into out (nil ignores it). It returns the
// reply subject (which names the answering instance and its epoch), ErrNoManager when no
// manager serves the rail, and *Error for a refusal, with the ep code.
func (e *EPCaller) Call(ctx context.Context, c EPCall, out any) (string, error) {
	in, outDigest, ok := EPContractDigests(c.Command)
	if !ok {
		return "", fmt.Errorf("manager %s: not a command of the manager's contract", c.Command)
	}
	if c.Route == "" {
		c.Route = EPRouteOne
	}
	if c.Deadline <= 0 {
		c.Deadline = 15 * time.Second
	}
	nonce, err := newEPNonce()
	if err != nil {
		return "", err
	}
	req := EPRequest{V: 1, ID: nonce[:22], Op: EPOp{Endpoint: EPEndpoint, Command: c.Command, InputDigest: in, OutputDigest: outDigest},
		Class: "ephemeral", ReplyExpected: true, Target: c.Target, DeadlineMs: c.Deadline.Milliseconds(),
		From: EPFrom{ID: e.Caller.String(), Name: e.Caller.Actor}}
	if c.Args != nil {
		if req.Args, err = json.Marshal(c.Args); err != nil {
			return "", fmt.Errorf("manager %s: encode: %w", c.Command, err)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("manager %s: encode: %w", c.Command, err)
	}
	var target []string
	if c.Mode != "" && c.Mode != "self" && c.Target != nil {
		target = []string{c.Target.Owner}
	}
	subj := EPRequestSubject(e.Space, c.Route, c.Instance, c.Command, c.Mode, target, e.Caller, e.UID, nonce)
	// The answer lands on this call's own reply subject, whichever instance and epoch; the
	// broker's no-responders status goes to a subject of the same rail.
	rail := strings.Join([]string{protocol.Root, e.Space, "ep", "reply", EPEndpoint, "*", "*", e.Caller.Owner, e.Caller.Actor, e.UID, nonce}, ".")
	sub, err := e.NC.SubscribeSync(rail)
	if err != nil {
		return "", fmt.Errorf("manager %s: %w", c.Command, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	sentinel := strings.Join([]string{protocol.Root, e.Space, "ep", "reply", EPEndpoint, "none", "0", e.Caller.Owner, e.Caller.Actor, e.UID, nonce}, ".")
	if err := e.NC.PublishMsg(&nats.Msg{Subject: subj, Reply: sentinel, Data: body}); err != nil {
		return "", fmt.Errorf("manager %s: %w", c.Command, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Deadline)
	defer cancel()
	if err := e.NC.FlushWithContext(ctx); err != nil {
		return "", fmt.Errorf("manager %s: %w", c.Command, err)
	}
	if last := e.NC.LastError(); last != nil && errors.Is(last, nats.ErrPermissionViolation) &&
		(strings.Contains(last.Error(), `"`+subj+`"`) || strings.Contains(last.Error(), `"`+rail+`"`)) {
		return "", &Error{Code: CodeDenied, Broker: true, Message: fmt.Sprintf("the broker refused %s's request to %s on the manager's endpoint rails: only the project's own identity may ask there", e.Caller, c.Command)}
	}
	m, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return "", ErrNoManager
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("manager %s: no answer on the endpoint rails: %w", c.Command, err)
		}
		return "", fmt.Errorf("manager %s: %w", c.Command, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		return "", ErrNoManager
	}
	var r EPReply
	if err := json.Unmarshal(m.Data, &r); err != nil || r.V != 1 {
		return m.Subject, fmt.Errorf("manager %s: answer is not an ep reply: %s", c.Command, m.Data)
	}
	if !r.OK {
		if r.Error == nil {
			return m.Subject, fmt.Errorf("manager %s: a refusal without an error", c.Command)
		}
		return m.Subject, &Error{Code: r.Error.Code, Message: r.Error.Message}
	}
	if out != nil && len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return m.Subject, fmt.Errorf("manager %s: answer data: %w", c.Command, err)
		}
	}
	return m.Subject, nil
}

// newEPNonce is a fresh request nonce: 32 base64url characters of 192 random bits.
func newEPNonce() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
