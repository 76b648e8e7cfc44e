package a2apeer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/internal/termsafe"
	"github.com/cotal-ai/cotal/protocol"
)

// Card is the part of an A2A Agent Card (v0.3) the bridge reads; other fields are
// ignored.
type Card struct {
	ProtocolVersion      string          `json:"protocolVersion"`
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	URL                  string          `json:"url"`
	PreferredTransport   string          `json:"preferredTransport,omitempty"`
	AdditionalInterfaces []CardInterface `json:"additionalInterfaces,omitempty"`
	Version              string          `json:"version"`
	Capabilities         struct {
		Streaming bool `json:"streaming,omitempty"`
	} `json:"capabilities"`
	Skills []CardSkill `json:"skills"`
}

// CardInterface is one more transport an agent serves.
type CardInterface struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

// CardSkill is one skill of an Agent Card.
type CardSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
}

// TransportJSONRPC is the A2A transport the bridge speaks.
const TransportJSONRPC = "JSONRPC"

// Bounds of what a card contributes to a presence card; longer text is cut (on a rune
// boundary, marked with …) and skills past MaxSkills are left out.
const (
	MaxSkills         = 32
	maxSkillID        = 128
	maxSkillName      = 128
	maxSkillDesc      = 512
	maxDescription    = 1024
	maxVersion        = 64
	maxProtocolString = 32
)

// ParseCard decodes a card's JSON.
func ParseCard(b []byte) (*Card, error) {
	var c Card
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not an agent card: %w", err)
	}
	return &c, nil
}

// Validate checks the card read from cardURL: it names itself, and it serves JSON-RPC
// (its preferred transport, or one of its additional interfaces) at a URL CheckURL
// accepts on the card's own host, so a card cannot send the bridge's calls (and the
// registration's token) to some other host.
func (c *Card) Validate(cardURL *url.URL) error {
	if strings.TrimSpace(c.Name) == "" {
		return errors.New("the card has no name: is this an A2A Agent Card?")
	}
	ep, err := c.Endpoint()
	if err != nil {
		return err
	}
	u, err := CheckURL(ep)
	if err != nil {
		return fmt.Errorf("its JSON-RPC url: %w", err)
	}
	if !strings.EqualFold(u.Hostname(), cardURL.Hostname()) {
		return fmt.Errorf("its JSON-RPC url %s is on another host than the card (%s): refused, so a card cannot point calls and tokens elsewhere", ep, cardURL.Hostname())
	}
	if u.Scheme != cardURL.Scheme {
		return fmt.Errorf("its JSON-RPC url %s is %s while the card was read over %s: refused", ep, u.Scheme, cardURL.Scheme)
	}
	return nil
}

// Endpoint is the URL the card serves JSON-RPC at: its url when the preferred transport
// is JSON-RPC (the default), else the additional interface that is.
func (c *Card) Endpoint() (string, error) {
	if c.PreferredTransport == "" || strings.EqualFold(c.PreferredTransport, TransportJSONRPC) {
		if c.URL == "" {
			return "", errors.New("the card has no url to call")
		}
		return c.URL, nil
	}
	for _, i := range c.AdditionalInterfaces {
		if strings.EqualFold(i.Transport, TransportJSONRPC) && i.URL != "" {
			return i.URL, nil
		}
	}
	return "", fmt.Errorf("the card serves %s, not JSON-RPC, which is the transport cotal speaks", clip(c.PreferredTransport, maxProtocolString))
}

// PeerSkills are the card's skills as a presence card carries them: at most MaxSkills,
// each text bounded and made safe for a terminal (termsafe.Escape).
func (c *Card) PeerSkills() []protocol.Skill {
	var out []protocol.Skill
	for _, s := range c.Skills {
		if len(out) == MaxSkills {
			break
		}
		sk := protocol.Skill{ID: safe(s.ID, maxSkillID), Name: safe(s.Name, maxSkillName), Description: safe(s.Description, maxSkillDesc)}
		if sk.Name == "" {
			sk.Name = sk.ID
		}
		if sk.ID == "" && sk.Name == "" {
			continue
		}
		out = append(out, sk)
	}
	return out
}

// safe is s on one line, escaped for a terminal, cut to at most n bytes.
func safe(s string, n int) string { return clip(termsafe.Escape(strings.TrimSpace(s)), n) }

// clip cuts s to at most n bytes on a rune boundary, marking a cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
