// Package meshview is the read-only live model of one space that the dashboard (cotal
// web) and the terminal UI (cotal console) render: the roster with each peer's state,
// role, harness and activity; channels with their recent messages; direct messages for
// the admin view; who is in which channel; the counts of working, waiting, idle and
// offline agents; the agents waiting longest ("needs you"); and the space's task board
// and file claims, with who holds what (fed by a TeamWatcher, team.go).
//
// A Model is pure state fed by a Watcher (watcher.go), which taps the space on a hidden
// observer connection: it never joins, so it is never in the roster and takes no work.
// Sender and channel always come from the subject the broker checked, never the payload.
package meshview

import (
	"cmp"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Defaults of Config.
const (
	DefaultChannelDepth = 200  // recent messages kept per channel
	DefaultDMDepth      = 500  // direct and anycast messages kept
	DefaultEventDepth   = 4096 // events kept for a feed to resume from
	DefaultFeedDepth    = 300  // newest messages of every kind kept for the all-activity feed
	subscriberBuffer    = 1024 // events queued for one feed before it is dropped
)

// Config tunes a Model. Zero values take the defaults.
type Config struct {
	Now          func() time.Time // the clock; nil means time.Now
	ChannelDepth int              // recent messages kept per channel; 0 means DefaultChannelDepth
	DMDepth      int              // direct and anycast messages kept; 0 means DefaultDMDepth
	EventDepth   int              // events kept for Since; 0 means DefaultEventDepth
	FeedDepth    int              // newest messages kept for Recent; 0 means DefaultFeedDepth
	Logger       *slog.Logger     // nil means discard
}

// Agent is one peer of the roster as the model shows it. Every string is what the peer
// wrote about itself except ID, which is its presence key (checked against its card).
type Agent struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Role        string          `json:"role,omitempty"`
	Harness     string          `json:"harness,omitempty"` // card.meta.connector
	Model       string          `json:"model,omitempty"`   // card.meta.model
	Description string          `json:"description,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	State       protocol.Status `json:"state"` // offline once the record is stale
	Activity    string          `json:"activity,omitempty"`
	Online      bool            `json:"online"`
	StatusSince int64           `json:"statusSince,omitempty"` // unix ms the peer gave for its status
	Seen        int64           `json:"seen"`                  // unix ms of its record
	Channels    []string        `json:"channels"`              // channels it posted to, sorted
}

// Message is one message the model holds. From, Channel, To and Role are read from the
// delivering subject; FromName is the sender's advisory display name.
type Message struct {
	ID       string                `json:"id"`
	TS       int64                 `json:"ts"`
	Kind     protocol.DeliveryKind `json:"kind"`
	From     string                `json:"from"`
	FromName string                `json:"fromName"`
	Channel  string                `json:"channel,omitempty"`
	To       string                `json:"to,omitempty"`
	Role     string                `json:"role,omitempty"`
	Text     string                `json:"text"`
}

// Channel is one channel: how many messages the model has seen on it and who posted.
type Channel struct {
	Name     string   `json:"name"`
	Messages int      `json:"messages"` // seen by this view (or stored, see Watcher)
	Members  []string `json:"members"`  // ids of peers that posted here, sorted
	LastTS   int64    `json:"lastTs,omitempty"`
}

// Counts are the golden signals: agents per state.
type Counts struct {
	Working int `json:"working"`
	Waiting int `json:"waiting"`
	Idle    int `json:"idle"`
	Offline int `json:"offline"`
}

// Waiting is one agent that needs a person, with how long it has waited.
type Waiting struct {
	Agent
	WaitingMS int64 `json:"waitingMs"`
}

// Event is one change of the model, numbered from 1 in the order it happened.
type Event struct {
	Seq     uint64   `json:"seq"`
	Type    string   `json:"type"` // EventRoster, EventMessage, EventTask or EventClaim
	Agent   *Agent   `json:"agent,omitempty"`
	Message *Message `json:"message,omitempty"`
	Task    *Task    `json:"task,omitempty"`
	Claim   *Claim   `json:"claim,omitempty"`
	Gone    bool     `json:"gone,omitempty"` // the task or claim is no longer there (only its keys are set)
}

// Event types.
const (
	EventRoster  = "roster"  // an agent joined, changed or went offline
	EventMessage = "message" // a message arrived
	EventTask    = "task"    // a task of the board was added, changed or removed
	EventClaim   = "claim"   // a file claim was made, changed, released or expired
)

// Model is the live state of one space. It is safe for concurrent use.
type Model struct {
	now          func() time.Time
	channelDepth int
	dmDepth      int
	eventDepth   int
	feedDepth    int
	log          *slog.Logger

	mu       sync.Mutex
	agents   map[string]*Agent
	channels map[string]*channelState
	dms      []Message // ring, oldest first
	feed     []Message // every kind, in the order applied, at most feedDepth
	seenIDs  map[string]struct{}
	idRing   []string
	idNext   int
	events   []Event // ring of the newest events, oldest first
	seq      uint64
	subs     map[chan Event]struct{}
	observed int // messages applied, for rates
	team     teamState
}

type channelState struct {
	recent  []Message // oldest first, at most channelDepth
	count   int
	members map[string]struct{}
	lastTS  int64
}

// New returns an empty model.
func New(cfg Config) *Model {
	m := &Model{now: cfg.Now, channelDepth: cfg.ChannelDepth, dmDepth: cfg.DMDepth, eventDepth: cfg.EventDepth,
		feedDepth: cfg.FeedDepth, log: cfg.Logger}
	if m.now == nil {
		m.now = time.Now
	}
	if m.channelDepth <= 0 {
		m.channelDepth = DefaultChannelDepth
	}
	if m.dmDepth <= 0 {
		m.dmDepth = DefaultDMDepth
	}
	if m.eventDepth <= 0 {
		m.eventDepth = DefaultEventDepth
	}
	if m.feedDepth <= 0 {
		m.feedDepth = DefaultFeedDepth
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.agents = map[string]*Agent{}
	m.channels = map[string]*channelState{}
	m.seenIDs = map[string]struct{}{}
	m.idRing = make([]string, m.channelDepth*4+m.dmDepth)
	m.subs = map[chan Event]struct{}{}
	return m
}

// ApplyPeer records a presence change and returns the event it made.
func (m *Model) ApplyPeer(p client.Peer) Event {
	c := p.Card
	a := Agent{
		ID: c.ID, Name: c.Name, Kind: c.Kind, Role: c.Role, Description: c.Description,
		Tags: slices.Clone(c.Tags), State: p.State(), Activity: p.Activity, Online: p.Online,
		StatusSince: p.StatusSince, Seen: p.TS,
		Harness: metaString(c.Meta, "connector"), Model: metaString(c.Meta, "model"),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.agents[a.ID]; old != nil {
		a.Channels = old.Channels
	}
	if a.Channels == nil {
		a.Channels = []string{}
	}
	m.agents[a.ID] = &a
	cp := a
	return m.emit(Event{Type: EventRoster, Agent: &cp})
}

// ApplyMessage records a message that passed the receive checks and returns its event;
// ok is false for a message already held (the same id seen live and in history).
func (m *Model) ApplyMessage(r protocol.Received) (Event, bool) {
	msg := Message{
		ID: r.Message.ID, TS: r.Message.TS, Kind: r.Kind, From: r.Subject.Sender.String(),
		FromName: r.Message.From.Name, Text: r.Message.Text(),
	}
	switch r.Kind {
	case protocol.DeliveryChannel:
		msg.Channel = r.Subject.Channel
	case protocol.DeliveryDM:
		msg.To = r.Subject.Recipient.String()
	case protocol.DeliveryAnycast:
		msg.Role = r.Subject.Role
	}
	return m.apply(msg)
}

func (m *Model) apply(msg Message) (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.firstID(msg.ID) {
		return Event{}, false
	}
	m.observed++
	if msg.Kind == protocol.DeliveryChannel {
		ch := m.channels[msg.Channel]
		if ch == nil {
			ch = &channelState{members: map[string]struct{}{}}
			m.channels[msg.Channel] = ch
		}
		ch.recent = appendBounded(ch.recent, msg, m.channelDepth)
		ch.count++
		ch.members[msg.From] = struct{}{}
		ch.lastTS = max(ch.lastTS, msg.TS)
		if a := m.agents[msg.From]; a != nil && !slices.Contains(a.Channels, msg.Channel) {
			cp := *a
			cp.Channels = append(slices.Clone(a.Channels), msg.Channel)
			sort.Strings(cp.Channels)
			m.agents[msg.From] = &cp
		}
	} else {
		m.dms = appendBounded(m.dms, msg, m.dmDepth)
	}
	m.feed = appendBounded(m.feed, msg, m.feedDepth)
	cp := msg
	return m.emit(Event{Type: EventMessage, Message: &cp}), true
}

// firstID remembers a non-empty id in a bounded ring and reports whether it is new.
func (m *Model) firstID(id string) bool {
	if id == "" {
		return true
	}
	if _, ok := m.seenIDs[id]; ok {
		return false
	}
	if old := m.idRing[m.idNext]; old != "" {
		delete(m.seenIDs, old)
	}
	id = strings.Clone(id)
	m.idRing[m.idNext] = id
	m.idNext = (m.idNext + 1) % len(m.idRing)
	m.seenIDs[id] = struct{}{}
	return true
}

// appendBounded appends v and keeps the newest n, reusing the backing array.
func appendBounded[T any](s []T, v T, n int) []T {
	if len(s) < n {
		return append(s, v)
	}
	copy(s, s[1:])
	s[len(s)-1] = v
	return s
}

// emit numbers ev, keeps it for Since and hands it to every subscriber. A subscriber
// whose queue is full is dropped (its channel closes): it resumes with Since.
func (m *Model) emit(ev Event) Event {
	m.seq++
	ev.Seq = m.seq
	m.events = appendBounded(m.events, ev, m.eventDepth)
	for ch := range m.subs {
		select {
		case ch <- ev:
		default:
			delete(m.subs, ch)
			close(ch)
		}
	}
	return ev
}

// Subscribe returns a channel of every later event and a cancel func. The channel closes
// when cancel is called, or when the subscriber fell behind by more than its queue; it
// then resumes from the last event it saw with SubscribeSince.
func (m *Model) Subscribe() (<-chan Event, func()) {
	_, ch, cancel, _ := m.SubscribeSince(^uint64(0)) // no past: from now on
	return ch, cancel
}

// SubscribeSince is Subscribe preceded by the events after seq, under one lock, so no
// event is missed or repeated between them. ok is false when some events after seq are
// no longer kept (the caller must read the model afresh); the subscription is live
// either way.
func (m *Model) SubscribeSince(seq uint64) (past []Event, live <-chan Event, cancel func(), ok bool) {
	ch := make(chan Event, subscriberBuffer)
	m.mu.Lock()
	past, ok = m.since(seq)
	m.subs[ch] = struct{}{}
	m.mu.Unlock()
	return past, ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.subs[ch]; ok {
			delete(m.subs, ch)
			close(ch)
		}
	}, ok
}

// since returns the kept events after seq; ok is false when some were dropped.
func (m *Model) since(seq uint64) ([]Event, bool) {
	if seq >= m.seq {
		return nil, seq == m.seq
	}
	if len(m.events) == 0 || m.events[0].Seq > seq+1 {
		return nil, false
	}
	i := sort.Search(len(m.events), func(i int) bool { return m.events[i].Seq > seq })
	return slices.Clone(m.events[i:]), true
}

// Seq is the number of the latest event.
func (m *Model) Seq() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq
}

// Observed is how many distinct messages the model has applied.
func (m *Model) Observed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.observed
}

// Roster lists every peer: agents first, working, waiting, idle, offline, then by name.
func (m *Model) Roster() []Agent {
	m.mu.Lock()
	out := make([]Agent, 0, len(m.agents))
	for _, a := range m.agents {
		cp := *a
		cp.Channels = slices.Clone(a.Channels)
		out = append(out, cp)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Kind == protocol.CardAgent) != (b.Kind == protocol.CardAgent) {
			return a.Kind == protocol.CardAgent
		}
		if ra, rb := stateRank(a.State), stateRank(b.State); ra != rb {
			return ra < rb
		}
		if na, nb := strings.ToLower(a.Name), strings.ToLower(b.Name); na != nb {
			return na < nb
		}
		return a.ID < b.ID
	})
	return out
}

func stateRank(s protocol.Status) int {
	switch s {
	case protocol.StatusWorking:
		return 0
	case protocol.StatusWaiting:
		return 1
	case protocol.StatusIdle:
		return 2
	}
	return 3
}

// Counts counts the agents (card kind agent) in each state; Waiting counts every peer
// waiting for a person, of any kind, as NeedsYou lists them.
func (m *Model) Counts() Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	var c Counts
	for _, a := range m.agents {
		if a.State == protocol.StatusWaiting {
			c.Waiting++
			continue
		}
		if a.Kind != protocol.CardAgent {
			continue
		}
		switch a.State {
		case protocol.StatusWorking:
			c.Working++
		case protocol.StatusIdle:
			c.Idle++
		default:
			c.Offline++
		}
	}
	return c
}

// NeedsYou lists the peers waiting for a person (online, in state waiting: an agent
// asking a question or a permission, a person's session marked waiting; any card kind,
// as the reference's NEEDS YOU lane), the one waiting longest first, with how long each
// has waited by the model's clock. It is empty, never nil, when nobody waits.
func (m *Model) NeedsYou() []Waiting {
	now := m.now().UnixMilli()
	out := []Waiting{}
	for _, a := range m.Roster() {
		if a.State != protocol.StatusWaiting {
			continue
		}
		since := a.StatusSince
		if since == 0 {
			since = a.Seen
		}
		a.StatusSince = since
		out = append(out, Waiting{Agent: a, WaitingMS: max(0, now-since)})
	}
	// Oldest status first, whatever the clock says; ties keep the roster's name order.
	sort.SliceStable(out, func(i, j int) bool { return out[i].StatusSince < out[j].StatusSince })
	return out
}

// Channels lists the channels the model has seen, by name.
func (m *Model) Channels() []Channel {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Channel, 0, len(m.channels))
	for name, ch := range m.channels {
		c := Channel{Name: name, Messages: ch.count, LastTS: ch.lastTS, Members: make([]string, 0, len(ch.members))}
		for id := range ch.members {
			c.Members = append(c.Members, id)
		}
		sort.Strings(c.Members)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// History returns a channel's newest messages held, at most limit (0: all held), oldest
// first; ok is false for a channel the model has not seen.
func (m *Model) History(channel string, limit int) ([]Message, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := m.channels[channel]
	if ch == nil {
		return nil, false
	}
	return tail(ch.recent, limit), true
}

// DMs returns the newest direct and anycast messages held, at most limit (0: all held),
// oldest first.
func (m *Model) DMs(limit int) []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return tail(m.dms, limit)
}

// Recent returns the newest messages of every kind the model holds (channel posts,
// direct messages and anycasts: the all-activity feed), at most limit (0: all held, up to
// Config.FeedDepth), oldest first by their time.
func (m *Model) Recent(limit int) []Message {
	m.mu.Lock()
	out := slices.Clone(m.feed)
	m.mu.Unlock()
	// History read at start lands stream by stream: order by time, keeping arrival
	// order between equal times.
	slices.SortStableFunc(out, func(a, b Message) int { return cmp.Compare(a.TS, b.TS) })
	return tail(out, limit)
}

func tail(s []Message, limit int) []Message {
	if limit > 0 && len(s) > limit {
		s = s[len(s)-limit:]
	}
	out := make([]Message, len(s))
	copy(out, s)
	return out
}

// Name returns the display name of id as its presence gives it, or "".
func (m *Model) Name(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.agents[id]; a != nil {
		return a.Name
	}
	return ""
}

func metaString(meta map[string]any, key string) string {
	if s, ok := meta[key].(string); ok {
		return s
	}
	return ""
}
