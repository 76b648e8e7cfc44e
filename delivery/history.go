package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// readHistory is the reference's readHistory (endpoint.ts deliveryReadHistory): a member
// reads the newest posts of a concrete channel through the daemon, which checks the
// member's ACL row (allowSubscribe and issuedAllowSubscribe both cover the channel) at
// every call, so a narrowed row stops the very next read. The page holds at most limit
// posts, oldest first, trimmed from the oldest end to fit 90 % of the broker's
// max_payload; complete says nothing older is retained on CHAT.
func (c *ctl) readHistory(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	var a struct {
		Channel json.RawMessage `json:"channel"`
		Limit   json.RawMessage `json:"limit"`
	}
	if err := decodeArgs(protocol.OpReadHistory, raw, &a); err != nil {
		return nil, err
	}
	var channel string
	if json.Unmarshal(a.Channel, &channel) != nil || strings.TrimSpace(channel) == "" {
		return nil, errors.New("readHistory: channel must be a non-blank string")
	}
	channel = strings.TrimSpace(channel)
	if err := protocol.CheckChannelPattern(channel); err != nil {
		return nil, fmt.Errorf("readHistory: channel: %w", err)
	}
	if protocol.CheckConcreteChannel(channel) != nil {
		return nil, fmt.Errorf("readHistory: %q must be a concrete channel (durable membership is per-concrete-channel, not wildcard)", channel)
	}
	limit, err := historyLimit(a.Limit)
	if err != nil {
		return nil, err
	}

	_, acl, err := c.readACL(ctx, protocol.OpReadHistory, who)
	var none *noACLError
	if errors.As(err, &none) {
		return nil, fmt.Errorf("readHistory: no read ACL on record for %s - not permitted", none.who)
	}
	if err != nil {
		return nil, err
	}
	if !acl.Readable(channel) {
		return nil, fmt.Errorf("readHistory: channel %q is not within your read ACL [%s] - refused", channel, strings.Join(acl.AllowSubscribe, ", "))
	}

	// One post more than the page is the completeness probe: it exists only if something
	// older is retained behind the page.
	page, err := c.hist.newest(ctx, c.r.js, c.r.space, channel, limit+1)
	if err != nil {
		return nil, fmt.Errorf("readHistory: %w", err)
	}
	reachedStart := len(page) <= limit
	if !reachedStart {
		page = page[len(page)-limit:]
	}
	budget := int(math.Floor(float64(c.r.nc.MaxPayload()) * 0.9))
	fitted := fitHistory(page, budget)
	if len(page) > 0 && len(fitted) == 0 {
		return nil, fmt.Errorf("readHistory: the newest message on %q alone exceeds the broker payload budget (%d bytes) - refused loudly rather than served as an empty page", channel, budget)
	}
	return protocol.ReadHistoryResult{Items: fitted, Complete: reachedStart && len(fitted) == len(page)}, nil
}

// historyLimit reads readHistory's limit as the reference does: absent means the
// default, anything but a positive integer is refused (echoed as JSON.stringify would),
// more than the maximum is clamped.
func historyLimit(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return protocol.ReadHistoryDefaultLimit, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("readHistory: limit must be a positive integer (got %s)", jsonEcho(raw))
	}
	if math.IsInf(f, 0) || f != math.Trunc(f) || f < 1 {
		return 0, fmt.Errorf("readHistory: limit must be a positive integer (got %s)", jsNumber(f))
	}
	return int(min(f, protocol.ReadHistoryMaxLimit)), nil
}

// jsonEcho is a JSON value as JavaScript's JSON.stringify writes it back: compact.
func jsonEcho(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	if _, ok := v.(string); ok {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return strings.TrimSuffix(b.String(), "\n")
	}
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// jsNumber writes f as JavaScript's Number#toString does (JSON.stringify of a number;
// infinities are null).
func jsNumber(f float64) string {
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return "null"
	case f == 0:
		return "0"
	case f < 0:
		return "-" + jsNumber(-f)
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	k := len(digits)
	e, _ := strconv.Atoi(exp)
	n := e + 1 // the decimal point sits after n digits
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	if n-1 >= 0 {
		return out + "e+" + strconv.Itoa(n-1)
	}
	return out + "e" + strconv.Itoa(n-1)
}

// fitHistory keeps the newest items whose encoded page fits budget bytes (the
// reference's fitHistoryPage: two bytes of brackets, each item and its comma).
func fitHistory(items []json.RawMessage, budget int) []json.RawMessage {
	used, first := 2, len(items)
	for i := len(items) - 1; i >= 0; i-- {
		b, err := json.Marshal(items[i]) // as the reply will write it
		if err != nil || used+len(b)+1 > budget {
			break
		}
		used += len(b) + 1
		first = i
	}
	return items[first:]
}

// historyItem is a CHAT message as readHistory serves it (the reference's
// historyMessageFromDelivery): an object with a string id and an object from whose id is
// the subject's sender, authenticated for the subject's channel. Anything else is
// skipped, and does not count toward a page.
func historyItem(subject string, data []byte) (json.RawMessage, bool) {
	sub, err := protocol.ParseSubject(subject)
	if err != nil || sub.Kind != protocol.KindChat || !protocol.ValidOwner(sub.Sender.Owner) {
		return nil, false
	}
	var head struct {
		ID   *string `json:"id"`
		From *struct {
			ID *string `json:"id"`
		} `json:"from"`
	}
	if json.Unmarshal(data, &head) != nil || head.ID == nil || head.From == nil || head.From.ID == nil || *head.From.ID != sub.Sender.String() {
		return nil, false
	}
	msg, err := protocol.AuthenticateChannelMessage(data, sub.Channel)
	if err != nil {
		return nil, false
	}
	return msg, true
}

// history reads a channel's newest posts for readHistory through the daemon's one
// transient CHAT reader (protocol.ConsumerHistoryRead), one request at a time.
type history struct {
	mu    sync.Mutex // one reader name: one read at a time
	js    jetstream.JetStream
	space string
}

// newest returns up to want of channel's newest posts that historyItem accepts, oldest
// first. It reads windows of CHAT sequences backwards from the stream's last sequence,
// each four times wider than the one before, until the page is full or the window
// reaches the stream's first sequence; only the channel's posts cross the wire. js and
// space are the daemon's.
func (h *history) newest(ctx context.Context, js jetstream.JetStream, space, channel string, want int) ([]json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.js, h.space = js, space
	chat := protocol.StreamChat(h.space)
	s, err := h.js.Stream(ctx, chat)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", chat, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 || st.LastSeq == 0 {
		return []json.RawMessage{}, nil
	}
	first := max(st.FirstSeq, 1)
	filter := protocol.ChannelFilter(h.space, channel)
	end, after := st.LastSeq, uint64(0)
	span := uint64(max(want, 64))
	page := []json.RawMessage{}
	for {
		start := first
		if end-first+1 > span {
			start = end - span + 1
		}
		rows, pending, err := h.window(ctx, filter, start, end, after, want)
		if err != nil {
			return nil, err
		}
		page = append(rows, page...)
		if len(page) >= want {
			return page[len(page)-want:], nil
		}
		if start <= first {
			return page, nil
		}
		end, after = start-1, pending
		span *= 4
	}
}

// window returns the accepted posts matching filter with sequences in [start, end], at
// most the newest keep of them, and how many posts matching filter the stream held from
// start on when the window was opened. after is that count for end+1 (what the next
// window up counted), used to size the pulls.
func (h *history) window(ctx context.Context, filter string, start, end, after uint64, keep int) ([]json.RawMessage, uint64, error) {
	chat := protocol.StreamChat(h.space)
	name := protocol.ConsumerHistoryRead
	if err := h.js.DeleteConsumer(ctx, chat, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, 0, fmt.Errorf("clear %s: %w", name, err)
	}
	cons, err := h.js.CreateConsumer(ctx, chat, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("create %s: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = h.js.DeleteConsumer(dctx, chat, name)
	}()
	pending := cons.CachedInfo().NumPending
	out := []json.RawMessage{}
	left := pending // matching posts still to read, at least those up to end
	for done := left == 0; !done; {
		n := 0
		// At most what the stream holds past the last post read, so the pull never waits.
		batch, err := cons.FetchNoWait(int(min(max(left-min(after, left), 1), 256)))
		if err != nil {
			return nil, 0, err
		}
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, err
			}
			seq := md.Sequence.Stream
			if seq > end {
				done = true
				break
			}
			if item, ok := historyItem(m.Subject(), m.Data()); ok {
				out = append(out, item)
				if len(out) > keep {
					out = out[1:]
				}
			}
			left = md.NumPending
			if seq == end || left == 0 {
				done = true
				break
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, 0, err
		}
		if n == 0 && !done {
			return nil, 0, fmt.Errorf("history: %s on %s stopped before sequence %d - the read was cut short, not empty", filter, chat, end)
		}
	}
	return out, pending, nil
}
