package agentmcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Bounds of cotal_wait: how long one call blocks at most and by default, and how often a
// client that gave a progress token hears that the call is still waiting.
const (
	MaxWaitSeconds     = 300
	DefaultWaitSeconds = 60
	// DefaultWaitProgress is how often a blocked cotal_wait sends a progress notification.
	DefaultWaitProgress = 5 * time.Second
	// maxFilterItems bounds each filter list of cotal_wait.
	maxFilterItems = 64
)

type waitArgs struct {
	Timeout  int      `json:"timeout,omitempty" jsonschema:"seconds to wait at most (1 to 300; default 60)"`
	Kinds    []string `json:"kinds,omitempty" jsonschema:"only these kinds wake the call: dm, channel, anycast (default all)"`
	Channels []string `json:"channels,omitempty" jsonschema:"only posts on these channels count (direct messages and role requests still do unless kinds leaves them out)"`
	From     []string `json:"from,omitempty" jsonschema:"only messages from these peers (name or dot-form id) count"`
}

type waitOut struct {
	Messages  []Item `json:"messages"`
	Remaining int    `json:"remaining"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	WaitedMS  int64  `json:"waitedMs"`
}

func waitSchema() *jsonschema.Schema {
	return toolSchema[waitArgs](func(p map[string]*jsonschema.Schema) {
		p["timeout"].Minimum, p["timeout"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(float64(MaxWaitSeconds))
		p["kinds"].MaxItems = maxLen(3)
		p["kinds"].Items.Enum = []any{string(protocol.DeliveryDM), string(protocol.DeliveryChannel), string(protocol.DeliveryAnycast)}
		p["channels"].MaxItems = maxLen(maxFilterItems)
		p["channels"].Items.MaxLength = maxLen(protocol.MaxChannelLength)
		p["from"].MaxItems = maxLen(maxFilterItems)
		p["from"].Items.MaxLength = maxLen(protocol.MaxNameLength)
	})
}

// waitFilter is what a cotal_wait call waits for; nil matches everything held.
func waitFilter(a waitArgs) (func(*client.Incoming) bool, error) {
	for _, k := range a.Kinds {
		switch protocol.DeliveryKind(k) {
		case protocol.DeliveryDM, protocol.DeliveryChannel, protocol.DeliveryAnycast:
		default:
			return nil, fmt.Errorf("kinds: %q is not a kind; use dm, channel or anycast", k)
		}
	}
	for _, ch := range a.Channels {
		if err := protocol.CheckChannelPattern(ch); err != nil {
			return nil, fmt.Errorf("channels: %q: %w", ch, err)
		}
	}
	if len(a.Kinds)+len(a.Channels)+len(a.From) == 0 {
		return nil, nil
	}
	return func(in *client.Incoming) bool {
		if len(a.Kinds) > 0 && !slices.Contains(a.Kinds, string(in.Kind)) {
			return false
		}
		if len(a.Channels) > 0 && in.Kind == protocol.DeliveryChannel && !slices.Contains(a.Channels, in.Subject.Channel) {
			return false
		}
		if len(a.From) > 0 && !slices.ContainsFunc(a.From, func(f string) bool {
			return strings.EqualFold(f, in.Subject.Sender.Actor) || f == in.Subject.Sender.String()
		}) {
			return false
		}
		return true
	}, nil
}

// arrivals is closed at the next change of what is held (a message held or handed back,
// the session ending).
func (b *inbox) arrivals() (<-chan struct{}, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed, b.closed
}

// notify wakes every cotal_wait blocked on the inbox; b.mu is held.
func (b *inbox) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// wait blocks until a held message matches the call's filter, the timeout passes or the
// call is cancelled, and returns what matched as one window, acked as cotal_inbox's is:
// once the result carrying it was written to the client.
func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, a waitArgs) (*mcp.CallToolResult, waitOut, error) {
	if a.Timeout < 0 || a.Timeout > MaxWaitSeconds {
		return nil, waitOut{}, fmt.Errorf("timeout %d: wait 1 to %d seconds", a.Timeout, MaxWaitSeconds)
	}
	timeout := time.Duration(a.Timeout) * time.Second
	if a.Timeout == 0 {
		timeout = DefaultWaitSeconds * time.Second
	}
	match, err := waitFilter(a)
	if err != nil {
		return nil, waitOut{}, fmt.Errorf("%w; nothing was read", err)
	}
	if match == nil {
		// A wait that found nothing answered no wake-up: only a non-nil filter says so.
		match = func(*client.Incoming) bool { return true }
	}
	admits := match
	match = func(in *client.Incoming) bool { return !isReceipt(in) && admits(in) } // receipts never end a wait
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(s.WaitProgress)
	defer tick.Stop()
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	for {
		changed, closed := s.box.arrivals()
		if closed {
			return nil, waitOut{}, errors.New("the session is closing")
		}
		if window := s.box.takeWhere(s.WindowItems, s.WindowBytes, time.Now().UnixMilli(), match); len(window) > 0 {
			return s.handOver(ctx, window, time.Since(start))
		}
		select {
		case <-changed:
		case <-deadline.C:
			held, _ := s.box.counts()
			out := waitOut{Messages: []Item{}, Remaining: held, TimedOut: true, WaitedMS: time.Since(start).Milliseconds()}
			msg := fmt.Sprintf("Nothing arrived in %s.", timeout)
			if held > 0 {
				msg += fmt.Sprintf(" %d other messages wait: cotal_inbox reads them.", held)
			}
			return text("%s", msg), out, nil
		case <-tick.C:
			if token != nil {
				waited := time.Since(start)
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
					Progress: waited.Seconds(), Total: timeout.Seconds(), Message: "waiting for a message"}); err != nil {
					s.Logger.Debug("wait progress", "err", err)
				}
			}
		case <-ctx.Done():
			return nil, waitOut{}, ctx.Err()
		}
	}
}

// handOver returns window as a cotal_wait result, acked once written (see inboxTool).
func (s *Server) handOver(ctx context.Context, window []*client.Incoming, waited time.Duration) (*mcp.CallToolResult, waitOut, error) {
	out := waitOut{Messages: []Item{}, WaitedMS: waited.Milliseconds()}
	var b strings.Builder
	for _, in := range window {
		it, line := shown(in)
		out.Messages = append(out.Messages, it)
		b.WriteString(line)
		b.WriteString("\n")
		s.log.addIncoming(in)
		s.rc.given(in)
	}
	held, _ := s.box.counts()
	out.Remaining = held + s.roleBacklog(ctx)
	if out.Remaining > 0 {
		fmt.Fprintf(&b, "%d more waiting: call cotal_inbox or cotal_wait again.", out.Remaining)
	}
	res := text("%s", strings.TrimRight(b.String(), "\n"))
	id, ok := s.box.await(window)
	if !ok {
		for _, in := range window {
			s.Endpoint.HandBack(in)
		}
		return nil, waitOut{}, errors.New("the session is closing")
	}
	res.Meta = mcp.Meta{WindowMeta: id}
	return res, out, nil
}
