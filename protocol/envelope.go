package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// EndpointRef names a sender: its principal (dot-form), display name and role.
type EndpointRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// Message is the Cotal envelope carried as JSON in every delivery message. Exactly one of
// Channel, To and ToService is set; the delivering subject, not these fields, decides
// how it was addressed.
type Message struct {
	ID        string      `json:"id"`
	TS        int64       `json:"ts"`
	Space     string      `json:"space"`
	From      EndpointRef `json:"from"`
	Channel   string      `json:"channel,omitempty"`
	To        string      `json:"to,omitempty"`
	ToService string      `json:"toService,omitempty"`
	Mentions  []string    `json:"mentions,omitempty"`
	Parts     []Part      `json:"parts"`
	ReplyTo   string      `json:"replyTo,omitempty"`
	ContextID string      `json:"contextId,omitempty"`
}

// Part kinds reserved to the spec; any other kind must be reverse-DNS.
const (
	PartText     = "text"
	PartData     = "data"
	PartArtifact = "artifact"
)

var (
	extKindRE = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`)
	digestRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Part is one piece of a message. Text, Data and the artifact fields belong to their
// kinds; an extension part (a reverse-DNS kind) keeps its whole JSON object in Raw.
type Part struct {
	Kind      string
	Text      string          // text
	Data      json.RawMessage // data: any JSON value
	Name      string          // artifact
	MediaType string          // artifact
	Digest    string          // artifact: sha256:<64 lowercase hex>
	Size      int64           // artifact: bytes, a hint never to allocate from
	Raw       json.RawMessage // extension: the part as received
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Kind: PartText, Text: s} }

type textWire struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type dataWire struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

type artifactWire struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// MarshalJSON writes the part in its kind's shape.
func (p Part) MarshalJSON() ([]byte, error) {
	switch p.Kind {
	case PartText:
		return json.Marshal(textWire{p.Kind, p.Text})
	case PartData:
		if len(p.Data) == 0 {
			return nil, errors.New("data part: no data")
		}
		return json.Marshal(dataWire{p.Kind, p.Data})
	case PartArtifact:
		return json.Marshal(artifactWire{p.Kind, p.Name, p.MediaType, p.Digest, p.Size})
	}
	if len(p.Raw) == 0 {
		return json.Marshal(struct {
			Kind string `json:"kind"`
		}{p.Kind})
	}
	return p.Raw, nil
}

// UnmarshalJSON reads a part of any kind; unknown fields are ignored.
func (p *Part) UnmarshalJSON(b []byte) error {
	// One pass covers the core kinds; an extension whose fields do not fit their types
	// falls back to reading only the kind.
	var w partWire
	if err := json.Unmarshal(b, &w); err != nil {
		var head struct {
			Kind *string `json:"kind"`
		}
		if json.Unmarshal(b, &head) != nil || head.Kind == nil || isCoreKind(*head.Kind) {
			return fmt.Errorf("part: %w", err)
		}
		w = partWire{Kind: head.Kind}
	}
	part, err := w.part()
	if err != nil {
		return err
	}
	if !isCoreKind(part.Kind) {
		part.Raw = append(json.RawMessage(nil), b...)
	}
	*p = part
	return nil
}

// partWire is every field a core part may carry, read in one pass.
type partWire struct {
	Kind      *string         `json:"kind"`
	Text      string          `json:"text"`
	Data      json.RawMessage `json:"data"`
	Name      string          `json:"name"`
	MediaType string          `json:"mediaType"`
	Digest    string          `json:"digest"`
	Size      int64           `json:"size"`
}

// part converts a wire part; an extension part is returned without its Raw bytes.
func (w *partWire) part() (Part, error) {
	if w.Kind == nil {
		return Part{}, errors.New("part has no kind")
	}
	p := Part{Kind: *w.Kind}
	switch p.Kind {
	case PartText:
		p.Text = w.Text
	case PartData:
		if len(w.Data) == 0 {
			// Without this a decoded message could not be encoded again (MarshalJSON refuses).
			return Part{}, errors.New("data part: no data")
		}
		p.Data = w.Data
	case PartArtifact:
		p.Name, p.MediaType, p.Digest, p.Size = w.Name, w.MediaType, w.Digest, w.Size
	}
	return p, nil
}

func isCoreKind(k string) bool { return k == PartText || k == PartData || k == PartArtifact }

// Validate checks a part before it is sent.
func (p Part) Validate() error {
	switch p.Kind {
	case PartText:
		return nil
	case PartData:
		if len(p.Data) == 0 || !json.Valid(p.Data) {
			return errors.New("data part: data must be a JSON value")
		}
	case PartArtifact:
		if !digestRE.MatchString(p.Digest) {
			return fmt.Errorf("artifact part: digest %q must be sha256:<64 lowercase hex>", p.Digest)
		}
		if p.Size < 0 {
			return fmt.Errorf("artifact part: size %d is negative", p.Size)
		}
	default:
		if !extKindRE.MatchString(p.Kind) {
			return fmt.Errorf("part kind %q is neither text, data, artifact nor a reverse-DNS extension", p.Kind)
		}
	}
	return nil
}

// Text joins the message's text parts with newlines.
func (m *Message) Text() string {
	var b strings.Builder
	n := 0
	for _, p := range m.Parts {
		if p.Kind != PartText {
			continue
		}
		if n > 0 { // not b.Len(): an empty first part still takes its line
			b.WriteByte('\n')
		}
		n++
		b.WriteString(p.Text)
	}
	return b.String()
}

// Validate checks a message before it is sent: an id, a sender, exactly one routing
// field, at least one part and valid parts.
func (m *Message) Validate() error {
	if m.ID == "" {
		return errors.New("message: empty id")
	}
	if _, err := ParsePrincipal(m.From.ID); err != nil {
		return fmt.Errorf("message from: %w", err)
	}
	routes := 0
	for _, r := range []string{m.Channel, m.To, m.ToService} {
		if r != "" {
			routes++
		}
	}
	if routes != 1 {
		return fmt.Errorf("message: want exactly one of channel, to and toService, got %d", routes)
	}
	if len(m.Parts) == 0 {
		return errors.New("message: no parts")
	}
	for i, p := range m.Parts {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("message part %d: %w", i, err)
		}
	}
	return nil
}

// errNoFrom is DecodeMessage's error for a missing from; Receive reports it as
// sender-mismatch, as the spec's rejection table says.
var errNoFrom = errors.New("message has no from")

// DecodeMessage parses an envelope. It fails on invalid UTF-8 or JSON, a missing or
// non-string id, or a missing from; unknown fields are ignored.
func DecodeMessage(data []byte) (Message, error) {
	if !utf8.Valid(data) {
		return Message{}, errors.New("message is not valid UTF-8")
	}
	if m, ok := decodeCanonical(data); ok {
		return m, nil
	}
	return decodeReflect(data)
}

// decodeReflect is DecodeMessage by encoding/json, for valid UTF-8 data.
func decodeReflect(data []byte) (Message, error) {
	// The fast path reads parts as plain structs in the same pass; only a message with an
	// extension part, or one whose parts do not fit that shape, is read again part by part.
	var w struct {
		Message
		ID    *string      `json:"id"`
		From  *EndpointRef `json:"from"`
		Parts []partWire   `json:"parts"`
	}
	fast := json.Unmarshal(data, &w) == nil
	if fast {
		w.Message.Parts = make([]Part, len(w.Parts))
		for i := range w.Parts {
			p, err := w.Parts[i].part()
			if err != nil {
				return Message{}, fmt.Errorf("message JSON: parts[%d]: %w", i, err)
			}
			if !isCoreKind(p.Kind) {
				fast = false
				break
			}
			w.Message.Parts[i] = p
		}
	}
	if !fast {
		var slow struct {
			Message
			ID   *string      `json:"id"`
			From *EndpointRef `json:"from"`
		}
		// json.Unmarshal, not a Decoder: Decoder.More misses a trailing "}" or "]".
		if err := json.Unmarshal(data, &slow); err != nil {
			return Message{}, fmt.Errorf("message JSON: %w", err)
		}
		w.Message, w.ID, w.From = slow.Message, slow.ID, slow.From
	}
	if w.ID == nil {
		return Message{}, errors.New("message has no id")
	}
	if w.From == nil {
		return Message{}, errNoFrom
	}
	m := w.Message
	m.ID, m.From = *w.ID, *w.From
	return m, nil
}

// NormalizeMentions trims, lowercases, drops empties and dedupes mention names; it
// returns nil when nothing is left so the field is omitted.
func NormalizeMentions(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}
