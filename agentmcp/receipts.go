package agentmcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Read receipts. When this session's model has a DM (a cotal_inbox or cotal_wait result
// carrying it was written, and it was acknowledged under the session's read mode), the
// server sends the DM's sender a receipt: a DM of its own whose one part is
// protocol.ReceiptPart, published with this agent's credential (the broker pins the
// reader in the subject, so no agent can send a receipt in another's name). A receipt is
// never answered by a receipt, and cotal_ack {receipts: "off"} stops sending them for the
// session. The sender's server keeps what arrives for cotal_status_of and shows each
// receipt as a small inbox item of kind "receipt"; one from anyone but the DM's recipient
// is dropped.

// Receipt states of cotal_status_of.
const (
	StateDelivered = "delivered" // stored in the recipient's durable inbox; no receipt yet
	StateRead      = "read"      // the recipient's receipt arrived
	StateUnknown   = "unknown"   // not a DM this session sent, and no receipt for it
)

// Receipt sending modes of a session (cotal_ack receipts).
const (
	ReceiptsOn  = "on"
	ReceiptsOff = "off"
)

// receiptQueue bounds the receipts waiting to be sent; past it a receipt is dropped (they
// are a courtesy, never a delivery guarantee).
const receiptQueue = 256

// sentDM is a DM this session sent.
type sentDM struct {
	to   protocol.Principal
	name string
	at   time.Time
	seq  uint64
}

// readMark is the receipt a DM's recipient sent.
type readMark struct {
	by protocol.Principal
	at int64 // unix ms, as the reader stated it
}

// receipts is what one session knows of the DMs it sent and the receipts it got, bounded
// to the newest max ids, and the receipts it owes.
type receipts struct {
	mu    sync.Mutex
	max   int
	sent  map[string]sentDM
	reads map[string]readMark
	order []string // ids in sent or reads, oldest first
	off   bool     // this session sends no receipts
	// quiet are the DMs given to the model while receipts were off: no receipt goes for
	// them even if receipts are on again when they are acknowledged.
	quiet map[*client.Incoming]bool
	queue chan *client.Incoming
}

func newReceipts(max int) *receipts {
	return &receipts{max: max, sent: map[string]sentDM{}, reads: map[string]readMark{}, quiet: map[*client.Incoming]bool{},
		queue: make(chan *client.Incoming, receiptQueue)}
}

// remember adds id to the bounded order; r.mu is held.
func (r *receipts) remember(id string) {
	if _, ok := r.sent[id]; ok {
		return
	}
	if _, ok := r.reads[id]; ok {
		return
	}
	r.order = append(r.order, id)
	for len(r.order) > r.max {
		delete(r.sent, r.order[0])
		delete(r.reads, r.order[0])
		r.order = r.order[1:]
	}
}

// noteSent records a DM this session sent.
func (r *receipts) noteSent(id string, d sentDM) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remember(id)
	r.sent[id] = d
}

// noteRead records the receipt rc from reader and reports whether it is kept: it must
// come from the recipient of the DM it names, when this session sent that DM (a DM of an
// earlier session is not known, so its receipt is kept under its reader's name). The
// first receipt of a DM stands.
func (r *receipts) noteRead(rc protocol.Receipt, reader protocol.Principal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.sent[rc.Of]; ok && d.to != reader {
		return false
	}
	if m, ok := r.reads[rc.Of]; ok {
		return m.by == reader
	}
	r.remember(rc.Of)
	r.reads[rc.Of] = readMark{by: reader, at: rc.At}
	return true
}

func (r *receipts) setOff(off bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.off = off
}

// given notes that in is in a result for the model: while receipts are off, it is marked
// to get none.
func (r *receipts) given(in *client.Incoming) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off && in.Kind == protocol.DeliveryDM && len(r.quiet) < r.max {
		r.quiet[in] = true
	}
}

// owed reports whether in may get a receipt now (receipts are on, and were when the
// model was given it), and forgets its mark.
func (r *receipts) owed(in *client.Incoming) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	quiet := r.quiet[in]
	delete(r.quiet, in)
	return !r.off && !quiet
}

func (r *receipts) isOff() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.off
}

func (r *receipts) mode() string {
	if r.isOff() {
		return ReceiptsOff
	}
	return ReceiptsOn
}

func (r *receipts) lookup(id string) (sentDM, bool, readMark, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, sent := r.sent[id]
	m, read := r.reads[id]
	return d, sent, m, read
}

// owesReceipt reports whether the model having in makes a receipt: a live DM from
// another principal that is not itself a receipt, on a session that sends them (and did
// when the model was given it).
func (s *Server) owesReceipt(in *client.Incoming) bool {
	if in.Kind != protocol.DeliveryDM || in.Historical || in.Subject.Sender == s.Endpoint.Principal() || !s.rc.owed(in) {
		return false
	}
	_, isReceipt := protocol.ReceiptOf(&in.Message)
	return !isReceipt
}

// readBy queues the receipt for in, which the model has and which was acknowledged.
func (s *Server) readBy(in *client.Incoming) {
	if !s.owesReceipt(in) {
		return
	}
	select {
	case s.rc.queue <- in:
	default:
		s.Logger.Debug("receipt dropped: too many waiting", "id", in.ID)
	}
}

// sendReceipts sends the queued receipts until ctx ends, then what is still queued, each
// within a short bound: the endpoint stays open until Run returns.
func (s *Server) sendReceipts(ctx context.Context) {
	send := func(ctx context.Context, in *client.Incoming) {
		d := client.Draft{Parts: []protocol.Part{protocol.ReceiptPart(in.ID, time.Now())}}
		if _, err := s.Endpoint.DM(ctx, in.Subject.Sender, d); err != nil {
			s.Logger.Debug("receipt not sent", "id", in.ID, "to", in.Subject.Sender.String(), "err", err)
		}
	}
	for {
		select {
		case in := <-s.rc.queue:
			send(ctx, in)
		case <-ctx.Done():
			end, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			for {
				select {
				case in := <-s.rc.queue:
					send(end, in)
				default:
					return
				}
			}
		}
	}
}

// takeReceipt keeps an arriving receipt for cotal_status_of and reports whether it is
// shown: a receipt that names no DM, or one from anyone but the recipient of the DM it
// names, is not (the caller acks it).
func (s *Server) takeReceipt(in *client.Incoming) (shown bool) {
	if in.Kind != protocol.DeliveryDM {
		return true
	}
	rc, ok := protocol.ReceiptOf(&in.Message)
	if !ok {
		return true
	}
	return rc.Valid() && s.rc.noteRead(rc, in.Subject.Sender)
}

// isReceipt reports whether in is a receipt.
func isReceipt(in *client.Incoming) bool {
	if in.Kind != protocol.DeliveryDM {
		return false
	}
	_, ok := protocol.ReceiptOf(&in.Message)
	return ok
}

// ReceiptRef is the receipt an inbox item carries.
type ReceiptRef struct {
	Of     string `json:"of"`
	State  string `json:"state"`
	ReadAt string `json:"readAt"`
}

// bodyOf is the text the model reads for in: a receipt and a mention say what they are,
// a mention notice says that the text is withheld; anything else is its text.
func bodyOf(in *client.Incoming) string {
	if rc, ok := protocol.ReceiptOf(&in.Message); ok && in.Kind == protocol.DeliveryDM {
		return fmt.Sprintf("read receipt: %s read your direct message %s at %s", sender(in), rc.Of, msTime(rc.At))
	}
	if in.Kind != protocol.DeliveryChannel || !protocol.IsMentionHandoff(in.Reason) {
		return in.Text()
	}
	ch := in.Subject.Channel
	if n, ok := protocol.MentionNoticeOf(&in.Message); ok {
		return fmt.Sprintf("mentioned you on #%s (post %s); you may not read #%s, so its text is not shown", ch, n.Of, ch)
	}
	return fmt.Sprintf("mentioned you on #%s: %s", ch, in.Text())
}

// decorate sets the receipt and mention fields of an inbox item.
func decorate(it *Item, in *client.Incoming) {
	if rc, ok := protocol.ReceiptOf(&in.Message); ok && in.Kind == protocol.DeliveryDM {
		it.Kind = "receipt"
		it.Receipt = &ReceiptRef{Of: rc.Of, State: StateRead, ReadAt: msTime(rc.At)}
		return
	}
	if in.Kind == protocol.DeliveryChannel && protocol.IsMentionHandoff(in.Reason) {
		it.MentionedYou = true
		if _, ok := protocol.MentionNoticeOf(&in.Message); ok {
			it.Withheld = true
		}
	}
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

type statusOfOut struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	To     string `json:"to,omitempty"`
	ToID   string `json:"toId,omitempty"`
	SentAt string `json:"sentAt,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Reader string `json:"reader,omitempty"`
	ReadAt string `json:"readAt,omitempty"`
}

// statusOf answers cotal_status_of: what became of one DM this session sent.
func (s *Server) statusOf(_ context.Context, _ *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, statusOfOut, error) {
	if err := client.CheckID(a.ID); err != nil || a.ID == "" {
		return nil, statusOfOut{}, fmt.Errorf("id %q is not a message id (cotal_dm returns the id of what it sent)", a.ID)
	}
	d, sent, m, read := s.rc.lookup(a.ID)
	out := statusOfOut{ID: a.ID, State: StateUnknown}
	if sent {
		out.State, out.To, out.ToID, out.SentAt, out.Seq = StateDelivered, d.name, d.to.String(), d.at.UTC().Format(time.RFC3339), d.seq
	}
	if read {
		out.State, out.Reader, out.ReadAt = StateRead, m.by.String(), msTime(m.at)
	}
	switch {
	case read:
		return text("Direct message %s was read by %s at %s.", a.ID, peerText(m.by.Actor, shownName), out.ReadAt), out, nil
	case sent:
		return text("Direct message %s to %s is delivered: stored in their durable inbox at %s (sequence %d), not read yet. A read receipt comes to your inbox when they read it, unless their session turned receipts off.",
			a.ID, peerText(d.name, shownName), out.SentAt, d.seq), out, nil
	}
	return text("No direct message %s was sent in this session, and no receipt names it: cotal_status_of knows the direct messages this session sent (the newest %d).",
		a.ID, s.rc.max), out, nil
}

// addReceiptTools registers cotal_status_of.
func (s *Server) addReceiptTools() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_status_of", Title: "Cotal: was my direct message read", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: idSchema(),
		Description: "What became of a direct message you sent (its id from cotal_dm): delivered (stored in the recipient's inbox, not read yet) or read (when, by whom, from the recipient's read receipt). Knows the direct messages this session sent."},
		s.statusOf)
}
