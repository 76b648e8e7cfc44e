package agentmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// Claude Code's channel extension: a server that declares the experimental capability
// ChannelCapability may send ChannelMethod notifications ({content, meta}), which wake
// an idle session and put the content in its context.
const (
	ChannelCapability = "claude/channel"
	ChannelMethod     = "notifications/claude/channel"
	// InboxURI is the resource whose updates tell a client without channels to pull.
	InboxURI = "cotal://inbox"
)

// WakeUpLead opens the content of every wake-up (see wakeParams).
const WakeUpLead = "New in your Cotal inbox"

// ChannelParams are the params of a ChannelMethod notification.
type ChannelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// notifyTransport wraps the transport the server runs on so the server can write a
// notification the SDK has no method for (ChannelMethod): the go-sdk sends only the
// notifications of the MCP spec, but its Connection may be written to concurrently, so
// one more JSON-RPC notification frame goes through the same connection and lock.
type notifyTransport struct {
	inner mcp.Transport
	// onSubscribed is called after the server acknowledged a subscriptions/listen stream.
	onSubscribed func()
	// onWindow is called once a response carrying a cotal_inbox window (WindowMeta) was
	// written, with the window's id and the write's error.
	onWindow func(id string, err error)
	mu       sync.Mutex
	conn     mcp.Connection
}

// WindowMeta is the _meta key of a cotal_inbox result that names the window it carries:
// the server acks the window's copies once that result is written to the client.
const WindowMeta = "cotal/window"

// subscriptionsAcked is the notification a server sends once it holds a subscription.
const subscriptionsAcked = "notifications/subscriptions/acknowledged"

// Connect connects the inner transport and keeps its connection for notify.
func (t *notifyTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	c = &watchedConn{Connection: c, onSubscribed: t.onSubscribed, onWindow: t.onWindow}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, nil
}

// watchedConn is a connection that reports the server's subscription acknowledgments
// and the writing of cotal_inbox results.
type watchedConn struct {
	mcp.Connection
	onSubscribed func()
	onWindow     func(id string, err error)
}

// Write writes msg and, once a subscription acknowledgment is out, calls onSubscribed;
// once a result carrying an inbox window is written (or failed to be), calls onWindow.
func (c *watchedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if err == nil && m.Method == subscriptionsAcked && c.onSubscribed != nil {
			c.onSubscribed()
		}
	case *jsonrpc.Response:
		if id := windowOf(m); id != "" && c.onWindow != nil {
			c.onWindow(id, err)
		}
	}
	return err
}

// windowOf is the inbox window a response's result carries, or "".
func windowOf(r *jsonrpc.Response) string {
	if r.Error != nil || len(r.Result) == 0 || !bytes.Contains(r.Result, []byte(WindowMeta)) {
		return ""
	}
	var res struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(r.Result, &res) != nil {
		return ""
	}
	id, _ := res.Meta[WindowMeta].(string)
	return id
}

// notify writes one notification frame of method with params.
func (t *notifyTransport) notify(ctx context.Context, method string, params any) error {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return errors.New("not connected")
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	if err := c.Write(ctx, &jsonrpc.Request{Method: method, Params: raw}); err != nil {
		return fmt.Errorf("write %s: %w", method, err)
	}
	return nil
}

// kindOf names how a message reached this agent, for the model.
// A read receipt is "receipt", a post that reached it because it mentions it "mention".
func kindOf(in *client.Incoming) string {
	switch {
	case isReceipt(in):
		return "receipt"
	case in.Kind == protocol.DeliveryChannel && protocol.IsMentionHandoff(in.Reason):
		return "mention"
	}
	return string(in.Kind)
}

// sender is the name of a message's sender. The subject's actor is what the broker
// pinned; the display name from the payload is used only when it agrees with it.
func sender(in *client.Incoming) string {
	return in.Subject.Sender.Actor
}

// RenderChannel renders a message as Claude Code shows a channel event:
// <channel source="cotal" from="NAME" kind="dm|channel|anycast" channel="C" id="ID"
// replyTo="ID" thread="ID" mentions="a,b">text</channel> (replyTo, thread and mentions
// only when set; thread only when it is not the message itself).
// Attributes and text are escaped, so what a peer wrote can neither close the tag nor
// add an attribute; the sender and channel come from the delivering subject.
func RenderChannel(in *client.Incoming) string { return renderChannel(in, bodyOf(in)) }

// renderChannel is RenderChannel with body as the text.
func renderChannel(in *client.Incoming, body string) string {
	var b strings.Builder
	b.WriteString(`<channel source="cotal" from="`)
	b.WriteString(html.EscapeString(sender(in)))
	b.WriteString(`" kind="`)
	b.WriteString(html.EscapeString(kindOf(in)))
	b.WriteString(`"`)
	if in.Kind == protocol.DeliveryAnycast {
		b.WriteString(` role="`)
		b.WriteString(html.EscapeString(in.Subject.Role))
		b.WriteString(`"`)
	}
	if in.Kind == protocol.DeliveryChannel {
		b.WriteString(` channel="`)
		b.WriteString(html.EscapeString(in.Subject.Channel))
		b.WriteString(`"`)
	}
	attr := func(name, v string) {
		if v != "" {
			b.WriteString(` ` + name + `="`)
			b.WriteString(html.EscapeString(termsafe.Escape(v)))
			b.WriteString(`"`)
		}
	}
	attr("id", in.ID)
	attr("replyTo", in.ReplyTo)
	if t := threadOf(in.Message); t != in.ID {
		attr("thread", t)
	}
	attr("mentions", strings.Join(in.Mentions, ","))
	b.WriteString(`>`)
	b.WriteString(html.EscapeString(body))
	b.WriteString(`</channel>`)
	return b.String()
}

// wakeParams builds the ChannelMethod notification that tells the model messages wait:
// how many, of which kind and from whom, and to call cotal_inbox. It carries no message
// text, so nothing is shown twice, and gives the model nothing to ack: MCP confirms no
// notification, and Claude Code drops one silently where its channels are off, so every
// message stays held until a cotal_inbox result carrying it is written. Claude Code wraps
// the content in <channel source="cotal" ...meta>content</channel>; names are escaped
// onto one line (termsafe) and the content is HTML-escaped so it cannot close that tag.
// Meta keys are [a-z_] only, as Claude Code drops others.
func wakeParams(named []*client.Incoming) ChannelParams {
	type group struct {
		one, many string // "a direct message", " direct messages" (after the count)
		from      []string
		n         int
	}
	var groups []*group
	byLabel := map[string]*group{}
	var kinds, froms []string
	for _, in := range named {
		one, many := "a direct message", " direct messages"
		switch in.Kind {
		case protocol.DeliveryAnycast:
			role := peerText(in.Subject.Role, shownToken)
			one, many = "a request for your role "+role, " requests for your role "+role
		case protocol.DeliveryChannel:
			ch := peerText(in.Subject.Channel, shownChannel)
			one, many = "a post on #"+ch, " posts on #"+ch
		}
		g := byLabel[one]
		if g == nil {
			g = &group{one: one, many: many}
			byLabel[one] = g
			groups = append(groups, g)
		}
		g.n++
		who := peerText(sender(in), shownName)
		if !slices.Contains(g.from, who) {
			g.from = append(g.from, who)
		}
		if !slices.Contains(froms, who) {
			froms = append(froms, who)
		}
		if k := kindOf(in); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		what := g.one
		if g.n > 1 {
			what = strconv.Itoa(g.n) + g.many
		}
		parts = append(parts, what+" from "+strings.Join(g.from, ", "))
	}
	it := "it"
	if len(named) > 1 {
		it = "them"
	}
	content := WakeUpLead + ": " + strings.Join(parts, "; ") + ". Call cotal_inbox to read " + it + "."
	return ChannelParams{Content: html.EscapeString(content), Meta: map[string]string{
		"from": strings.Join(froms, ","), "kind": strings.Join(kinds, ","), "count": strconv.Itoa(len(named)),
	}}
}

// wantsChannel reports whether the client declared the claude/channel capability.
func wantsChannel(p *mcp.InitializeParams) bool {
	if p == nil || p.Capabilities == nil {
		return false
	}
	_, ok := p.Capabilities.Experimental[ChannelCapability]
	return ok
}
