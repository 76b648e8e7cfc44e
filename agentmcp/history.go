package agentmcp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Bounds of the history tools. What a search or a thread hands the model is one summary
// line per message (SummaryChars of its text), at most MaxSearchLimit lines a call;
// cotal_message returns one message whole.
const (
	DefaultLogSize     = 2000 // messages a session remembers (given to the model, or sent)
	MaxSearchLimit     = 50
	DefaultSearchLimit = 20
	MaxSearchOffset    = 1000
	MaxThreadItems     = 200
	SummaryChars       = 160
	maxQueryLength     = 512
	// historyPage is how many of a channel's newest posts one search or thread reads
	// (the delivery daemon's bound).
	historyPage = 200
)

// logged is one message this session knows: given to the model, or sent by it.
type logged struct {
	protocol.Message
	Kind    protocol.DeliveryKind
	Channel string // channel posts
	Sender  protocol.Principal
	Role    string // anycasts
}

// msgLog is what one session was given and sent, newest last, bounded: the agent's own
// direct messages can be searched only here, as its credential reads its DMs once,
// through its DM durable, and grants no read of the DM stream.
type msgLog struct {
	mu   sync.Mutex
	max  int
	list []logged
}

func newMsgLog(max int) *msgLog { return &msgLog{max: max} }

func (l *msgLog) add(e logged) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.ContainsFunc(l.list, func(x logged) bool { return x.ID == e.ID && x.Kind == e.Kind }) {
		return
	}
	l.list = append(l.list, e)
	if len(l.list) > l.max {
		l.list = slices.Delete(l.list, 0, len(l.list)-l.max)
	}
}

func (l *msgLog) addIncoming(in *client.Incoming) {
	l.add(logged{Message: in.Message, Kind: in.Kind, Channel: in.Subject.Channel, Sender: in.Subject.Sender, Role: in.Subject.Role})
}

func (l *msgLog) all() []logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// record logs a message this agent sent.
func (s *Server) record(kind protocol.DeliveryKind, where string, d client.Draft, sent client.Sent) {
	ep := s.Endpoint
	card := ep.Card()
	m := protocol.Message{ID: sent.ID, TS: time.Now().UnixMilli(), Space: ep.Space(),
		From:     protocol.EndpointRef{ID: card.ID, Name: card.Name, Role: card.Role},
		Mentions: protocol.NormalizeMentions(d.Mentions), Parts: d.Parts, ReplyTo: d.ReplyTo, ContextID: d.ContextID}
	e := logged{Message: m, Kind: kind, Sender: ep.Principal()}
	switch kind {
	case protocol.DeliveryChannel:
		e.Channel, e.Message.Channel = where, where
	case protocol.DeliveryDM:
		e.Message.To = where
	case protocol.DeliveryAnycast:
		e.Role, e.Message.ToService = where, where
	}
	s.log.add(e)
}

// threadOf is the thread a message belongs to: its contextId, else the message it
// replies to (threads are flat), else itself.
func threadOf(m protocol.Message) string {
	switch {
	case m.ContextID != "":
		return m.ContextID
	case m.ReplyTo != "":
		return m.ReplyTo
	}
	return m.ID
}

// reply is the Draft fields of a reply to replyTo: the thread of the message answered
// when this session knows it, else replyTo itself.
func (s *Server) reply(ctx context.Context, d *client.Draft, replyTo, channel string) error {
	if replyTo == "" {
		return nil
	}
	if err := client.CheckID(replyTo); err != nil {
		return fmt.Errorf("replyTo: %w; nothing was sent", err)
	}
	d.ReplyTo, d.ContextID = replyTo, replyTo
	if m, ok := s.find(ctx, replyTo, channel); ok {
		d.ContextID = threadOf(m.Message)
	}
	return nil
}

// known is every message the agent may read and this session can reach: its log, then
// the newest posts of each of channels read through the delivery daemon, which checks
// the agent's own read grant (a channel it may not read is refused, never answered). A
// channel whose history cannot be read is reported in skipped.
func (s *Server) known(ctx context.Context, channels []string) (out []logged, skipped []string) {
	out = s.log.all()
	seen := map[string]bool{}
	for _, e := range out {
		seen[string(e.Kind)+e.ID] = true
	}
	for _, ch := range channels {
		msgs, _, err := s.Endpoint.ReadHistory(ctx, ch, historyPage)
		if err != nil {
			s.Logger.Debug("read history", "channel", ch, "err", err)
			skipped = append(skipped, ch)
			continue
		}
		for _, m := range msgs {
			if seen[string(protocol.DeliveryChannel)+m.ID] {
				continue
			}
			seen[string(protocol.DeliveryChannel)+m.ID] = true
			p, err := protocol.ParsePrincipal(m.From.ID)
			if err != nil {
				continue // a post whose sender is unreadable is not shown as anyone's
			}
			out = append(out, logged{Message: m, Kind: protocol.DeliveryChannel, Channel: ch, Sender: p})
		}
	}
	slices.SortStableFunc(out, func(a, b logged) int {
		return cmp.Or(cmp.Compare(a.TS, b.TS), strings.Compare(a.ID, b.ID))
	})
	return out, skipped
}

// readable are the concrete channels this agent has joined.
func (s *Server) readable() []string {
	var out []string
	for _, ch := range s.Endpoint.Channels() {
		if protocol.CheckConcreteChannel(ch) == nil {
			out = append(out, ch)
		}
	}
	return out
}

// find looks id up in the log, then in channel's history (or every joined channel's).
func (s *Server) find(ctx context.Context, id, channel string) (logged, bool) {
	for _, e := range s.log.all() {
		if e.ID == id {
			return e, true
		}
	}
	chs := s.readable()
	if channel != "" {
		chs = []string{channel}
	}
	all, _ := s.known(ctx, chs)
	for _, e := range all {
		if e.ID == id {
			return e, true
		}
	}
	return logged{}, false
}

// loggedItem is e as the model sees it.
func loggedItem(e logged) Item {
	it := Item{ID: e.ID, Kind: string(e.Kind), From: e.Sender.Actor, FromID: e.Sender.String(),
		Time: time.UnixMilli(e.TS).UTC().Format(time.RFC3339), Text: textOf(e.Message), Mentions: e.Mentions,
		ReplyTo: e.ReplyTo, Thread: threadOf(e.Message), Channel: e.Channel, Role: e.Role}
	return it
}

func textOf(m protocol.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if p.Kind == protocol.PartText {
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// summary is one line for e: id, time, where, who, and the start of its text, escaped.
func summary(e logged) string {
	where := "dm"
	switch e.Kind {
	case protocol.DeliveryChannel:
		where = "#" + e.Channel
	case protocol.DeliveryAnycast:
		where = "role " + e.Role
	}
	t := textOf(e.Message)
	if utf8.RuneCountInString(t) > SummaryChars {
		r := []rune(t)
		t = string(r[:SummaryChars]) + "…"
	}
	line := fmt.Sprintf("[%s] %s %s %s", e.ID, time.UnixMilli(e.TS).UTC().Format(time.RFC3339), where, e.Sender.Actor)
	if e.ReplyTo != "" {
		line += " (reply to " + e.ReplyTo + ")"
	}
	return peerText(line+": "+t, 4*SummaryChars+512)
}

type searchArgs struct {
	Query   string `json:"query" jsonschema:"words to find; a message matches when its text has every word (case-insensitive)"`
	Channel string `json:"channel,omitempty" jsonschema:"search only this channel's posts (default: your channels and your direct messages)"`
	From    string `json:"from,omitempty" jsonschema:"only messages from this peer (name or dot-form id)"`
	Since   string `json:"since,omitempty" jsonschema:"only messages since this time: RFC 3339 (2026-01-02T15:04:05Z) or a duration back from now (2h, 30m)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"lines to return (1 to 50; default 20)"`
	Offset  int    `json:"offset,omitempty" jsonschema:"skip this many matches (newest first), to page on"`
}

type searchOut struct {
	Matches []Item   `json:"matches"`
	Total   int      `json:"total"`
	Next    int      `json:"nextOffset,omitempty"`
	Skipped []string `json:"unreadableChannels,omitempty"`
}

type idArgs struct {
	ID string `json:"id" jsonschema:"a message id (cotal_inbox, cotal_search and cotal_thread show them)"`
}

type threadOut struct {
	Thread   string `json:"thread"`
	Messages []Item `json:"messages"`
}

func searchSchema() *jsonschema.Schema {
	return toolSchema[searchArgs](func(p map[string]*jsonschema.Schema) {
		p["query"].MaxLength = maxLen(maxQueryLength)
		p["channel"].MaxLength = maxLen(protocol.MaxChannelLength)
		p["from"].MaxLength = maxLen(protocol.MaxNameLength)
		p["since"].MaxLength = maxLen(64)
		p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(float64(MaxSearchLimit))
		p["offset"].Minimum, p["offset"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(float64(MaxSearchOffset))
	})
}

func idSchema() *jsonschema.Schema {
	return toolSchema[idArgs](func(p map[string]*jsonschema.Schema) { p["id"].MaxLength = maxLen(maxIDLength) })
}

// parseSince reads a search's since: RFC 3339, or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q: give an RFC 3339 time (2026-01-02T15:04:05Z) or a duration (2h); nothing was searched", s)
}

// search finds messages by words over what the agent may read: the posts of its channels
// (or of channel), read with its own grant, and the messages of its own session.
func (s *Server) search(ctx context.Context, _ *mcp.CallToolRequest, a searchArgs) (*mcp.CallToolResult, searchOut, error) {
	words := strings.Fields(strings.ToLower(a.Query))
	if len(words) == 0 {
		return nil, searchOut{}, fmt.Errorf("query is empty: give the words to find")
	}
	if a.Limit < 0 || a.Limit > MaxSearchLimit || a.Offset < 0 || a.Offset > MaxSearchOffset {
		return nil, searchOut{}, fmt.Errorf("limit %d, offset %d: limit is 1 to %d, offset 0 to %d; nothing was searched", a.Limit, a.Offset, MaxSearchLimit, MaxSearchOffset)
	}
	limit := a.Limit
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	since, err := parseSince(a.Since, time.Now())
	if err != nil {
		return nil, searchOut{}, err
	}
	chs := s.readable()
	if a.Channel != "" {
		if err := protocol.CheckConcreteChannel(a.Channel); err != nil {
			return nil, searchOut{}, fmt.Errorf("channel %q: %w", a.Channel, err)
		}
		chs = []string{a.Channel}
	}
	all, skipped := s.known(ctx, chs)
	var hits []logged
	for _, e := range slices.Backward(all) { // newest first
		if a.Channel != "" && (e.Kind != protocol.DeliveryChannel || e.Channel != a.Channel) {
			continue
		}
		if a.From != "" && !strings.EqualFold(a.From, e.Sender.Actor) && a.From != e.Sender.String() {
			continue
		}
		if !since.IsZero() && e.TS < since.UnixMilli() {
			continue
		}
		body := strings.ToLower(textOf(e.Message))
		if !allWords(body, words) {
			continue
		}
		hits = append(hits, e)
	}
	out := searchOut{Matches: []Item{}, Total: len(hits), Skipped: skipped}
	var lines []string
	for i := a.Offset; i < len(hits) && i < a.Offset+limit; i++ {
		it := loggedItem(hits[i])
		it.Text = ""
		out.Matches = append(out.Matches, it)
		lines = append(lines, summary(hits[i]))
	}
	if n := a.Offset + limit; n < len(hits) {
		out.Next = n
		lines = append(lines, fmt.Sprintf("%d more matches: pass offset %d for the next page.", len(hits)-n, n))
	}
	if len(out.Matches) == 0 {
		lines = append(lines, "No message matches.")
	} else {
		lines = append(lines, "cotal_message {id} returns one whole; cotal_thread {id} its thread.")
	}
	if len(skipped) > 0 {
		lines = append(lines, "History not readable (not searched): "+peerText(strings.Join(skipped, ", "), shownChannel)+".")
	}
	return text("%s", strings.Join(lines, "\n")), out, nil
}

func allWords(body string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(body, w) {
			return false
		}
	}
	return true
}

// message returns one message whole.
func (s *Server) message(ctx context.Context, _ *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, Item, error) {
	if err := client.CheckID(a.ID); err != nil || a.ID == "" {
		return nil, Item{}, fmt.Errorf("id %q is not a message id (cotal_search shows them)", a.ID)
	}
	e, ok := s.find(ctx, a.ID, "")
	if !ok {
		return nil, Item{}, fmt.Errorf("no message %s among your direct messages of this session and the history of your channels", a.ID)
	}
	return text("%s", renderLogged(e)), loggedItem(e), nil
}

// renderLogged renders e as an inbox item is rendered.
func renderLogged(e logged) string {
	in := &client.Incoming{Message: e.Message, Kind: e.Kind,
		Subject: protocol.Subject{Sender: e.Sender, Channel: e.Channel, Role: e.Role}}
	return RenderChannel(in)
}

// thread returns the thread of a message in order: the message it belongs to and every
// reply in it this agent may read.
func (s *Server) thread(ctx context.Context, _ *mcp.CallToolRequest, a idArgs) (*mcp.CallToolResult, threadOut, error) {
	if err := client.CheckID(a.ID); err != nil || a.ID == "" {
		return nil, threadOut{}, fmt.Errorf("id %q is not a message id (cotal_inbox shows them)", a.ID)
	}
	var chs []string
	if e, ok := s.find(ctx, a.ID, ""); ok {
		if e.Kind == protocol.DeliveryChannel {
			chs = []string{e.Channel}
		}
		a.ID = threadOf(e.Message)
	} else {
		chs = s.readable()
	}
	all, _ := s.known(ctx, chs)
	in := map[string]bool{a.ID: true}
	var members []logged
	for grew := true; grew; { // replies to replies join their thread
		grew = false
		for _, e := range all {
			if !in[e.ID] && (e.ID == a.ID || e.ContextID == a.ID || in[e.ReplyTo]) {
				in[e.ID], grew = true, true
			}
		}
	}
	for _, e := range all {
		if in[e.ID] {
			members = append(members, e)
		}
	}
	if len(members) == 0 {
		return nil, threadOut{}, fmt.Errorf("no message %s among your direct messages of this session and the history of your channels", a.ID)
	}
	if len(members) > MaxThreadItems {
		members = members[len(members)-MaxThreadItems:]
	}
	out := threadOut{Thread: a.ID, Messages: []Item{}}
	var lines []string
	for _, e := range members {
		it := loggedItem(e)
		it.Text = ""
		out.Messages = append(out.Messages, it)
		lines = append(lines, summary(e))
	}
	lines = append(lines, fmt.Sprintf("%d messages in thread %s, oldest first; cotal_message {id} returns one whole.", len(members), a.ID))
	return text("%s", strings.Join(lines, "\n")), out, nil
}

// shown is a window's item as the model gets it, with its line of text. Channel history
// is bounded: a replayed post longer than SummaryChars shows its start and how much was
// left out, and cotal_message {id} returns it whole; live messages show whole.
func shown(in *client.Incoming) (Item, string) {
	it := item(in)
	if !in.Historical || utf8.RuneCountInString(it.Text) <= SummaryChars {
		return it, RenderChannel(in)
	}
	r := []rune(it.Text)
	it.Text, it.Truncated = string(r[:SummaryChars]), true
	body := it.Text + fmt.Sprintf("… [history: %d more characters; cotal_message {id} returns it whole]", len(r)-SummaryChars)
	return it, renderChannel(in, body)
}
