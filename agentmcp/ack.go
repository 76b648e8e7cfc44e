package agentmcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
)

// Acknowledgement modes of a session (cotal_ack mode). Under AckDeliver (the default) a
// window's copies are acked once the result carrying them was written to the client:
// delivered means read. Under AckRead they stay unacked on the broker, kept from
// redelivery while the session lives, until cotal_ack names them; when the session ends
// first they are handed back and the next incarnation gets them again.
const (
	AckDeliver = "deliver"
	AckRead    = "read"
)

// MaxAckIDs bounds the ids one cotal_ack settles.
const MaxAckIDs = 100

// maxIDLength bounds a message id argument (client.CheckID's bound).
const maxIDLength = 128

type ackArgs struct {
	IDs  []string `json:"ids,omitempty" jsonschema:"ids of messages to settle: shown and not yet acknowledged, or still held (as cotal_inbox peek shows them)"`
	Mode string   `json:"mode,omitempty" jsonschema:"deliver = what cotal_inbox or cotal_wait returns is acknowledged once you have it (the default); read = it stays unacknowledged until cotal_ack names its id, and comes back next session if you never do. Lasts for this session"`
	// Receipts turns read receipts on or off for the session (receipts.go).
	Receipts string `json:"receipts,omitempty" jsonschema:"on = the sender of a direct message learns when you have read it (a read receipt; the default); off = send no read receipts. Lasts for this session"`
}

type ackOut struct {
	Mode     string   `json:"mode"`
	Receipts string   `json:"receipts"`
	Settled  []string `json:"settled"`
	Unknown  []string `json:"unknown,omitempty"`
	Pending  int      `json:"pending"`
}

func ackSchema() *jsonschema.Schema {
	return toolSchema[ackArgs](func(p map[string]*jsonschema.Schema) {
		p["ids"].MaxItems = maxLen(MaxAckIDs)
		p["ids"].Items.MaxLength = maxLen(maxIDLength)
		p["mode"].Enum = []any{AckDeliver, AckRead}
		p["receipts"].Enum = []any{ReceiptsOn, ReceiptsOff}
	})
}

// holdUnacked keeps in, whose result was written, unacked until cotal_ack names it; it
// reports false when the session is over (the caller acks it: the model has it).
func (b *inbox) holdUnacked(in *client.Incoming) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.unacked[in.ID] = in
	return true
}

// settle removes and returns the copy of id that is unacked or held; nil when neither.
func (b *inbox) settle(id string) *client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	if in, ok := b.unacked[id]; ok {
		delete(b.unacked, id)
		return in
	}
	for _, in := range b.items {
		if in.ID == id {
			b.remove(func(x *client.Incoming) bool { return x == in })
			return in
		}
	}
	return nil
}

// pending counts the copies awaiting cotal_ack.
func (b *inbox) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.unacked)
}

// unackedAll removes and returns every copy awaiting cotal_ack.
func (b *inbox) unackedAll() []*client.Incoming {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*client.Incoming, 0, len(b.unacked))
	for id, in := range b.unacked {
		out = append(out, in)
		delete(b.unacked, id)
	}
	return out
}

func (s *Server) ackMode() string {
	if s.readAcks.Load() {
		return AckRead
	}
	return AckDeliver
}

// ackTool sets the session's acknowledgement mode and whether it sends read receipts,
// and settles the named copies: each is
// acked on the broker (it is never redelivered) and leaves the inbox. Switching back to
// deliver settles every copy still awaiting cotal_ack: the model has them.
func (s *Server) ackTool(_ context.Context, _ *mcp.CallToolRequest, a ackArgs) (*mcp.CallToolResult, ackOut, error) {
	if len(a.IDs) > MaxAckIDs {
		return nil, ackOut{}, fmt.Errorf("ids: %d given, settle at most %d at once; nothing was settled", len(a.IDs), MaxAckIDs)
	}
	for _, id := range a.IDs {
		if err := client.CheckID(id); err != nil || id == "" {
			return nil, ackOut{}, fmt.Errorf("ids: %q is not a message id (cotal_inbox shows each message's id); nothing was settled", id)
		}
	}
	switch a.Mode {
	case "", AckDeliver, AckRead:
	default:
		return nil, ackOut{}, fmt.Errorf("mode %q: use deliver or read; nothing changed", a.Mode)
	}
	switch a.Receipts {
	case "", ReceiptsOn, ReceiptsOff:
	default:
		return nil, ackOut{}, fmt.Errorf("receipts %q: use on or off; nothing changed", a.Receipts)
	}
	if a.Receipts != "" { // before settling: what this call settles follows the new choice
		s.rc.setOff(a.Receipts == ReceiptsOff)
	}
	out := ackOut{Settled: []string{}}
	for _, id := range a.IDs {
		in := s.box.settle(id)
		if in == nil {
			out.Unknown = append(out.Unknown, id)
			continue
		}
		s.log.addIncoming(in)
		s.ack(in)
		out.Settled = append(out.Settled, id)
	}
	switch a.Mode {
	case AckRead:
		s.readAcks.Store(true)
	case AckDeliver:
		s.readAcks.Store(false)
		for _, in := range s.box.unackedAll() {
			s.ack(in)
		}
	}
	out.Mode, out.Receipts, out.Pending = s.ackMode(), s.rc.mode(), s.box.pending()
	var b strings.Builder
	fmt.Fprintf(&b, "Mode %s, read receipts %s. Settled %d.", out.Mode, out.Receipts, len(out.Settled))
	if len(out.Unknown) > 0 {
		fmt.Fprintf(&b, " Not waiting for an ack (already settled, or never yours): %s.", peerText(strings.Join(out.Unknown, ", "), 4096))
	}
	if out.Pending > 0 {
		fmt.Fprintf(&b, " %d shown messages still await cotal_ack.", out.Pending)
	}
	return text("%s", b.String()), out, nil
}
