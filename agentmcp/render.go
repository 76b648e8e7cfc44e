package agentmcp

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// Bounds of the peer strings a tool result shows the model, in bytes before escaping. A
// peer writes its own presence record, so its card name, role, kind, harness and activity
// are what it chose: each is cut to its bound and escaped onto one line (see peerText).
const (
	shownName     = protocol.MaxNameLength     // card name
	shownActivity = protocol.MaxActivityLength // activity line
	shownToken    = protocol.MaxNameLength     // role
	shownWord     = 32                         // card kind, harness
	shownChannel  = 256                        // a channel's one-line description
)

// MaxInboxAsks bounds the asks argument of cotal_inbox: how many requests for its role an
// agent takes in one call.
const MaxInboxAsks = 10

// peerText makes s, a string a peer chose, fit to show the model: cut to at most max bytes
// on a rune boundary, with a marker saying how many bytes were left out, then escaped by
// termsafe.Escape, so a line break shows as \n and an escape sequence as \x1b: it stays on
// its line and cannot pose as another line of the result (a peer, a count, an instruction).
func peerText(s string, max int) string {
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("… [%d bytes cut]", len(s)-cut)
	}
	return termsafe.Escape(s)
}

// toolSchema is the input schema of T with edit applied (bounds the struct tags cannot say).
func toolSchema[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Errorf("input schema: %w", err)) // a fixed Go type: a bug, not input
	}
	edit(s.Properties)
	return s
}

// maxLen is a maxLength for a schema.
func maxLen(n int) *int { return &n }

// roleBacklog is how many requests wait in the queue of the agent's role, 0 without a
// role or when the broker does not say.
func (s *Server) roleBacklog(ctx context.Context) int {
	if s.Endpoint.Card().Role == "" {
		return 0
	}
	n, err := s.Endpoint.RoleBacklog(ctx)
	if err != nil {
		s.Logger.Debug("role backlog", "err", err)
		return 0
	}
	return n
}

// takeAsks tops the inbox up to n requests for the agent's role: those it holds count, and
// the rest are taken from the role's queue now. A failed take leaves the queue as it was.
func (s *Server) takeAsks(ctx context.Context, n int) {
	if n <= 1 || s.Endpoint.Card().Role == "" {
		return // one ask is what the endpoint holds by itself
	}
	want := n
	for _, in := range s.box.snapshot() {
		if in.Kind == protocol.DeliveryAnycast {
			want--
		}
	}
	if want <= 0 {
		return
	}
	asks, err := s.Endpoint.TakeAsks(ctx, min(want, client.MaxTakeAsks))
	if err != nil {
		s.Logger.Debug("take asks", "err", err)
		return
	}
	for _, in := range asks {
		s.box.add(in)
	}
}
