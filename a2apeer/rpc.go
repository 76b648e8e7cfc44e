package a2apeer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/cotal-ai/cotal/a2awire"
	"github.com/cotal-ai/cotal/internal/redact"
)

// The message and task shapes are a2awire's, shared with the inbound gateway (a2agw).
type (
	// Message is an A2A message.
	Message = a2awire.Message
	// Part is one part of an A2A message or artifact.
	Part = a2awire.Part
	// FilePart is the file of a file part.
	FilePart = a2awire.FilePart
	// Task is an A2A task.
	Task = a2awire.Task
	// TaskStatus is a task's state and the agent's message about it.
	TaskStatus = a2awire.TaskStatus
	// Artifact is an output of a task.
	Artifact = a2awire.Artifact
)

// Task states (a2awire's).
const (
	StateSubmitted     = a2awire.StateSubmitted
	StateWorking       = a2awire.StateWorking
	StateInputRequired = a2awire.StateInputRequired
	StateAuthRequired  = a2awire.StateAuthRequired
	StateCompleted     = a2awire.StateCompleted
	StateCanceled      = a2awire.StateCanceled
	StateFailed        = a2awire.StateFailed
	StateRejected      = a2awire.StateRejected
	StateUnknown       = a2awire.StateUnknown
)

// Settled reports whether a task in state waits on nobody but the asker: it ended, or
// the agent asks something back.
func Settled(state string) bool {
	switch state {
	case StateSubmitted, StateWorking:
		return false
	}
	return true
}

// Result is what message/send answers: a message, or a task.
type Result struct {
	Message *Message
	Task    *Task
}

// UnmarshalJSON reads a result of either kind.
func (r *Result) UnmarshalJSON(b []byte) error {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	switch head.Kind {
	case "message":
		r.Message = &Message{}
		return json.Unmarshal(b, r.Message)
	case "task":
		r.Task = &Task{}
		return json.Unmarshal(b, r.Task)
	}
	return fmt.Errorf("result kind %q: want message or task", head.Kind)
}

// RPCError is a JSON-RPC error an agent answered.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("A2A error %d: %s", e.Code, safe(e.Message, 256))
}

// HTTPError is an HTTP status other than 200 from the agent.
type HTTPError struct{ Status int }

func (e *HTTPError) Error() string {
	return "HTTP " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
}

// Transient reports whether err may pass if the call is made again: the agent could not
// be reached, timed out, or answered 429 or 5xx. A JSON-RPC error, another HTTP status
// or a refused URL is not transient.
func Transient(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status == http.StatusTooManyRequests || he.Status >= 500
	}
	var re *RPCError
	if errors.As(err, &re) || errors.Is(err, ErrURL) {
		return false
	}
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue)
}

// Caller calls one agent's JSON-RPC endpoint.
type Caller struct {
	Endpoint string // checked by CheckURL before every call
	Token    string // sent as a bearer when not ""
	HTTP     HTTP
	ids      atomic.Int64
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

// SendParams are message/send's params.
type SendParams struct {
	Message       Message `json:"message"`
	Configuration struct {
		Blocking            bool     `json:"blocking"`
		AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	} `json:"configuration"`
}

// Send calls message/send with m, not blocking: the agent answers with a message, or
// with the task it made, which may still run.
func (c *Caller) Send(ctx context.Context, m Message) (Result, error) {
	p := SendParams{Message: m}
	p.Configuration.AcceptedOutputModes = []string{"text/plain", "application/json"}
	var r Result
	err := c.call(ctx, "message/send", p, &r)
	return r, err
}

// GetTask calls tasks/get for the task id.
func (c *Caller) GetTask(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := c.call(ctx, "tasks/get", map[string]any{"id": id}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// CancelTask calls tasks/cancel for the task id.
func (c *Caller) CancelTask(ctx context.Context, id string) error {
	var t Task
	return c.call(ctx, "tasks/cancel", map[string]any{"id": id}, &t)
}

func (c *Caller) call(ctx context.Context, method string, params, out any) error {
	u, err := CheckURL(c.Endpoint)
	if err != nil {
		return err
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: strconv.FormatInt(c.ids.Add(1), 10), Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("%s: encode: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.client(u).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %w", method, &HTTPError{Status: resp.StatusCode})
	}
	b, err := readBounded(resp.Body, MaxResponseSize, "the answer")
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	var r rpcResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: not a JSON-RPC answer: %w", method, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%s: %w", method, r.Error)
	}
	if len(r.Result) == 0 {
		return fmt.Errorf("%s: the answer has neither result nor error", method)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("%s: result: %w", method, err)
	}
	return nil
}
