package agentmcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Per-channel modes (cotal_channel_mode), as the reference's connector names them.
const (
	ModeNormal = "normal" // the channel follows the global attention
	ModeQuiet  = "quiet"  // its posts never wake the model; a post mentioning it still does
	ModeMuted  = "muted"  // its posts are not received at all, mentions included
)

// attention is how much peer traffic interrupts the model: the global mode
// (cotal_status attention) and the per-channel modes (cotal_channel_mode). Both are
// runtime and per session, published with presence as advisory hints.
type attention struct {
	mu    sync.Mutex
	mode  protocol.Attention
	modes map[string]string // channel -> quiet or muted
}

// get is the global mode ("" reads as open) and a copy of the channel modes.
func (a *attention) get() (protocol.Attention, map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.mode
	if m == "" {
		m = protocol.AttentionOpen
	}
	return m, maps.Clone(a.modes)
}

// channelMode is ch's mode, ModeNormal when none is set.
func (a *attention) channelMode(ch string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m, ok := a.modes[ch]; ok {
		return m
	}
	return ModeNormal
}

// attentionText says what a global mode does, echoed whenever it is set or read.
var attentionText = map[protocol.Attention]string{
	protocol.AttentionOpen:  "open: you receive everything; channel posts wake you",
	protocol.AttentionDND:   "dnd: channel posts no longer wake you (they wait in cotal_inbox); direct messages, role requests and posts that mention you still wake you",
	protocol.AttentionFocus: "focus: only direct messages and role requests reach you unasked; a post that mentions you wakes you to pull; other channel posts are held for cotal_inbox",
}

// mentionsMe reports whether a channel post names this agent in its mentions.
func (s *Server) mentionsMe(in *client.Incoming) bool {
	card := s.Endpoint.Card()
	return slices.ContainsFunc(in.Mentions, func(m string) bool {
		return strings.EqualFold(m, card.Name) || m == card.ID
	})
}

// wakes reports whether a held message may be named in a wake-up: a direct message or a
// role request always; a channel post unless its channel is quiet or muted, or the global
// mode is dnd or focus, in which case only when it mentions this agent. A message that
// does not wake stays held for cotal_inbox.
func (s *Server) wakes(in *client.Incoming) bool {
	if isReceipt(in) {
		return false // a read receipt waits in the inbox
	}
	if in.Kind != protocol.DeliveryChannel {
		return true
	}
	mode, modes := s.att.get()
	switch modes[in.Subject.Channel] {
	case ModeMuted:
		return false
	case ModeQuiet:
		return s.mentionsMe(in)
	}
	if mode == protocol.AttentionDND || mode == protocol.AttentionFocus {
		return s.mentionsMe(in)
	}
	return true
}

// muted reports whether in is a post on a channel this agent muted: it is acked and
// dropped on arrival, never held.
func (s *Server) muted(in *client.Incoming) bool {
	return in.Kind == protocol.DeliveryChannel && s.att.channelMode(in.Subject.Channel) == ModeMuted
}

// publishAttention writes the attention hints into this agent's presence.
func (s *Server) publishAttention(ctx context.Context) error {
	mode, modes := s.att.get()
	if err := s.Endpoint.SetAttention(ctx, mode, modes); err != nil {
		return fmt.Errorf("publish attention: %w", err)
	}
	return nil
}

// setAttention sets the global mode and publishes it.
func (s *Server) setAttention(ctx context.Context, a string) error {
	m := protocol.Attention(a)
	if _, ok := attentionText[m]; !ok {
		return fmt.Errorf("attention %q: use open, dnd or focus; nothing changed", a)
	}
	s.att.mu.Lock()
	s.att.mode = m
	s.att.mu.Unlock()
	err := s.publishAttention(ctx)
	s.wake() // held posts a quieter mode kept back may now be named
	return err
}

type channelModeArgs struct {
	Channel string `json:"channel" jsonschema:"the channel to set: a concrete channel you read, e.g. random"`
	Mode    string `json:"mode" jsonschema:"quiet = still received, never wakes you unless it mentions you; muted = not received at all, mentions included (direct messages still reach you); normal = follow your global attention"`
}

type channelModeOut struct {
	Channel string            `json:"channel"`
	Mode    string            `json:"mode"`
	Modes   map[string]string `json:"channelModes"`
}

func channelModeSchema() *jsonschema.Schema {
	return toolSchema[channelModeArgs](func(p map[string]*jsonschema.Schema) {
		p["channel"].MaxLength = maxLen(protocol.MaxChannelLength)
		p["mode"].Enum = []any{ModeNormal, ModeQuiet, ModeMuted}
	})
}

// reads reports whether the agent reads ch: it joined it, or a pattern it joined covers it.
func (s *Server) reads(ch string) bool {
	return slices.ContainsFunc(s.Endpoint.Channels(), func(p string) bool { return p == ch || protocol.ChannelMatches(p, ch) })
}

func (s *Server) channelMode(ctx context.Context, _ *mcp.CallToolRequest, a channelModeArgs) (*mcp.CallToolResult, channelModeOut, error) {
	if err := protocol.CheckConcreteChannel(a.Channel); err != nil {
		return nil, channelModeOut{}, fmt.Errorf("channel %q: %w; nothing changed", a.Channel, err)
	}
	switch a.Mode {
	case ModeNormal, ModeQuiet, ModeMuted:
	default:
		return nil, channelModeOut{}, fmt.Errorf("mode %q: use normal, quiet or muted; nothing changed", a.Mode)
	}
	if a.Mode != ModeNormal && !s.reads(a.Channel) {
		return nil, channelModeOut{}, fmt.Errorf("you do not read %s (joined: %s): cotal_join it first; nothing changed",
			a.Channel, strings.Join(s.Endpoint.Channels(), ", "))
	}
	s.att.mu.Lock()
	if a.Mode == ModeNormal {
		delete(s.att.modes, a.Channel)
	} else {
		if s.att.modes == nil {
			s.att.modes = map[string]string{}
		}
		s.att.modes[a.Channel] = a.Mode
	}
	s.att.mu.Unlock()
	if a.Mode == ModeMuted {
		// What is held from the channel and not yet given to the model goes too: muted
		// means not received.
		for _, in := range s.box.drop(s.muted) {
			s.ack(in)
		}
	}
	_, modes := s.att.get()
	out := channelModeOut{Channel: a.Channel, Mode: a.Mode, Modes: modes}
	if out.Modes == nil {
		out.Modes = map[string]string{}
	}
	if err := s.publishAttention(ctx); err != nil {
		return nil, out, fmt.Errorf("%s is now %s here, but %w", a.Channel, a.Mode, err)
	}
	s.wake()
	desc := map[string]string{
		ModeQuiet:  "still received, but it never wakes you; a post that mentions you still does. Read it with cotal_inbox",
		ModeMuted:  "no longer received, mentions included; direct messages still reach you",
		ModeNormal: "back to following your global attention",
	}[a.Mode]
	return text("%s is now %s: %s. This lasts for this session.", a.Channel, a.Mode, desc), out, nil
}

// errClosing is returned by a tool called while the session shuts down.
var errClosing = errors.New("this session is shutting down")
