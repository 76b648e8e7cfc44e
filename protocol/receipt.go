package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Extension part kinds Go writes (Cotal's own extensions use ai.cotal.*; a receiver that
// does not support a kind ignores the part).
const (
	// PartReceipt marks a DM as a receipt for a DM its recipient sent earlier (Receipt).
	PartReceipt = "ai.cotal.receipt"
	// PartMention marks a hand-off copy as a mention notice without the post's text
	// (MentionNotice): the mentioned agent may not read the channel.
	PartMention = "ai.cotal.mention"
)

// ReceiptRead is the one receipt state sent: the DM was given to the reader's model and
// acknowledged under its session's read mode.
const ReceiptRead = "read"

// Receipt is the receipt part of a DM: {"kind":"ai.cotal.receipt","receipt":"read",
// "of":"<id of the DM read>","at":<epoch ms>}. The reader is the DM's sender, which the
// broker pins in its subject; a receipt names nothing else.
type Receipt struct {
	Kind    string `json:"kind"`
	Receipt string `json:"receipt"`
	Of      string `json:"of"`
	At      int64  `json:"at"`
}

// maxReceiptID bounds the id a receipt or a mention notice names (client.CheckID's bound).
const maxReceiptID = 128

// ReceiptPart is the part of a read receipt for the DM of.
func ReceiptPart(of string, at time.Time) Part {
	raw, _ := json.Marshal(Receipt{Kind: PartReceipt, Receipt: ReceiptRead, Of: of, At: at.UnixMilli()})
	return Part{Kind: PartReceipt, Raw: raw}
}

// ReceiptOf returns the receipt m carries, if it is a receipt: a part of kind PartReceipt
// with a known state, an id of 1 to 128 bytes and a time. A message carrying one is a
// receipt whatever else it holds, and is never answered by another receipt.
func ReceiptOf(m *Message) (Receipt, bool) {
	for _, p := range m.Parts {
		if p.Kind != PartReceipt {
			continue
		}
		var r Receipt
		if json.Unmarshal(p.Raw, &r) != nil || r.Receipt != ReceiptRead || r.Of == "" || len(r.Of) > maxReceiptID || r.At <= 0 {
			return Receipt{Kind: PartReceipt}, true // a receipt all the same: never answered
		}
		return r, true
	}
	return Receipt{}, false
}

// Valid reports whether r names a DM and a time (ReceiptOf also returns a receipt it
// could not read, so it is never answered).
func (r Receipt) Valid() bool { return r.Of != "" && r.At > 0 }

// MentionNotice is the part of a mention notice: {"kind":"ai.cotal.mention",
// "channel":"<channel>","of":"<post id>"}. It replaces the parts of a post whose channel
// the mentioned agent may not read, so the notice carries who (the envelope's from),
// where and the id, never the text.
type MentionNotice struct {
	Kind    string `json:"kind"`
	Channel string `json:"channel"`
	Of      string `json:"of"`
}

// MentionNoticeOf returns the mention notice m carries, if it is one.
func MentionNoticeOf(m *Message) (MentionNotice, bool) {
	for _, p := range m.Parts {
		if p.Kind != PartMention {
			continue
		}
		var n MentionNotice
		if json.Unmarshal(p.Raw, &n) != nil || CheckConcreteChannel(n.Channel) != nil || n.Of == "" || len(n.Of) > maxReceiptID {
			return MentionNotice{Kind: PartMention}, true
		}
		return n, true
	}
	return MentionNotice{}, false
}

// EncodeMentionNotice is the envelope of a mention notice for the post envelope, posted
// on channel: the post's id, ts, space, from, channel and mentions, and one PartMention
// part in place of its parts. Nothing else of the post is kept (no text, data, replyTo or
// contextId), so the notice reveals who posted, where, when and its id only.
func EncodeMentionNotice(envelope []byte, channel string) ([]byte, error) {
	var head struct {
		ID       string          `json:"id"`
		TS       int64           `json:"ts"`
		Space    string          `json:"space"`
		From     EndpointRef     `json:"from"`
		Mentions json.RawMessage `json:"mentions,omitempty"`
	}
	if err := json.Unmarshal(envelope, &head); err != nil {
		return nil, fmt.Errorf("mention notice: %w", err)
	}
	if head.ID == "" || len(head.ID) > maxReceiptID {
		return nil, errors.New("mention notice: the post has no usable id")
	}
	raw, err := json.Marshal(MentionNotice{Kind: PartMention, Channel: channel, Of: head.ID})
	if err != nil {
		return nil, err
	}
	m := Message{ID: head.ID, TS: head.TS, Space: head.Space, From: head.From, Channel: channel,
		Parts: []Part{{Kind: PartMention, Raw: raw}}}
	if len(head.Mentions) > 0 {
		var mentions []string
		if json.Unmarshal(head.Mentions, &mentions) == nil {
			m.Mentions = NormalizeMentions(mentions)
		}
	}
	return json.Marshal(m)
}
