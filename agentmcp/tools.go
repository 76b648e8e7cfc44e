package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// Tool names, in the order they are listed.
var ToolNames = []string{
	"cotal_orientation", "cotal_roster", "cotal_inbox", "cotal_send", "cotal_dm", "cotal_anycast",
	"cotal_status", "cotal_channels", "cotal_channel_info", "cotal_join", "cotal_leave",
	"cotal_connection_status", "cotal_channel_mode", "cotal_docs", "cotal_feedback", "cotal_reconnect",
	"cotal_wait", "cotal_ack", "cotal_search", "cotal_message", "cotal_thread",
	"cotal_claim_paths", "cotal_release_paths", "cotal_claims", "cotal_status_of",
}

// Inputs. Every input schema is closed (additionalProperties false), so an unknown
// argument, or an identity one such as owner, from or actor, is refused before the tool
// runs: who speaks comes from the credential, never from an argument.
type (
	noArgs   struct{}
	sendArgs struct {
		Text     string   `json:"text" jsonschema:"the message"`
		Channel  string   `json:"channel,omitempty" jsonschema:"channel to post to; default the first channel you joined"`
		Mentions []string `json:"mentions,omitempty" jsonschema:"names of peers to wake; each must be in the roster"`
		ReplyTo  string   `json:"replyTo,omitempty" jsonschema:"id of the message this answers; the reply joins its thread"`
	}
	dmArgs struct {
		To      string `json:"to" jsonschema:"the peer's name (or dot-form id owner.actor)"`
		Text    string `json:"text" jsonschema:"the message"`
		ReplyTo string `json:"replyTo,omitempty" jsonschema:"id of the message this answers; the reply joins its thread"`
	}
	anycastArgs struct {
		Role string `json:"role" jsonschema:"the role; exactly one of its holders gets the message"`
		Text string `json:"text" jsonschema:"the message"`
	}
	statusArgs struct {
		Status    string  `json:"status,omitempty" jsonschema:"idle, working or waiting"`
		Attention string  `json:"attention,omitempty" jsonschema:"open = receive everything; dnd = channel posts do not wake you (they wait in cotal_inbox); focus = only direct messages and role requests reach you unasked, a post mentioning you wakes you to pull. Resets to open each session"`
		Activity  *string `json:"activity,omitempty" jsonschema:"one line on what you are doing; empty clears it"`
	}
	channelArgs struct {
		Channel string `json:"channel" jsonschema:"the channel"`
	}
	inboxArgs struct {
		Peek bool `json:"peek,omitempty" jsonschema:"if true, show the window without clearing it (and take no role request)"`
		Asks int  `json:"asks,omitempty" jsonschema:"take up to this many requests for your role in this call (1 to 10; default 1); the rest stay queued for the role"`
	}
)

// Outputs (structured content).
type (
	// PeerInfo is one roster entry.
	PeerInfo struct {
		Name      string `json:"name"`
		ID        string `json:"id"`
		Kind      string `json:"kind,omitempty"`
		Role      string `json:"role,omitempty"`
		Status    string `json:"status"`
		Activity  string `json:"activity,omitempty"`
		Harness   string `json:"harness,omitempty"`
		Online    bool   `json:"online"`
		Ourselves bool   `json:"you,omitempty"`
		// Model, Cwd and Channels are what the peer publishes: its model, its working
		// directory relative to the repository (a full path outside it is not shown), and
		// the channels it reads.
		Model    string   `json:"model,omitempty"`
		Cwd      string   `json:"cwd,omitempty"`
		Channels []string `json:"channels,omitempty"`
		// Claims are the peer's live file claims (cotal_claims has them in full).
		Claims []ClaimRef `json:"claims,omitempty"`
		// Tasks are the ids of the unfinished board tasks the peer holds.
		Tasks []string `json:"tasks,omitempty"`
	}
	// ClaimRef is one file claim of a roster entry.
	ClaimRef struct {
		Path      string `json:"path"`
		Exclusive bool   `json:"exclusive"`
	}
	// Item is one inbox message.
	Item struct {
		ID         string            `json:"id"`
		Kind       string            `json:"kind"`
		From       string            `json:"from"`
		FromID     string            `json:"fromId"`
		Channel    string            `json:"channel,omitempty"`
		Role       string            `json:"role,omitempty"`
		Time       string            `json:"time"`
		Text       string            `json:"text"`
		Data       []json.RawMessage `json:"data,omitempty"`
		Artifacts  []ArtifactRef     `json:"artifacts,omitempty"`
		Mentions   []string          `json:"mentions,omitempty"`
		ReplyTo    string            `json:"replyTo,omitempty"`
		Thread     string            `json:"thread,omitempty"`
		Historical bool              `json:"historical,omitempty"`
		// Truncated is set on a history item shown in part (cotal_message returns it whole).
		Truncated bool `json:"truncated,omitempty"`
		// Receipt is set on a read receipt (kind "receipt") for a DM this agent sent.
		Receipt *ReceiptRef `json:"receipt,omitempty"`
		// MentionedYou is set on a post that reached this agent because it mentions it
		// (kind "mention"); Withheld when the agent may not read the channel, so the text
		// is not shown.
		MentionedYou bool `json:"mentionedYou,omitempty"`
		Withheld     bool `json:"withheld,omitempty"`
	}
	// ArtifactRef names an artifact part without its bytes.
	ArtifactRef struct {
		Name      string `json:"name"`
		MediaType string `json:"mediaType,omitempty"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size,omitempty"`
	}
	orientationOut struct {
		Name      string     `json:"name"`
		ID        string     `json:"id"`
		Role      string     `json:"role,omitempty"`
		Space     string     `json:"space"`
		Channels  []string   `json:"channels"`
		PostTo    string     `json:"defaultChannel,omitempty"`
		Status    string     `json:"status"`
		Activity  string     `json:"activity,omitempty"`
		Present   []PeerInfo `json:"present"`
		Unread    int        `json:"unread"`
		Directed  int        `json:"unreadDirect"`
		Backlog   int        `json:"roleBacklog,omitempty"`
		Push      bool       `json:"push"`
		Tools     []string   `json:"tools"`
		Connected bool       `json:"connected"`
	}
	rosterOut struct {
		Peers []PeerInfo `json:"peers"`
	}
	inboxOut struct {
		Messages []Item `json:"messages"`
		// Remaining is what waits after this window: held messages and the role's backlog.
		Remaining int `json:"remaining"`
		// Peek is set when nothing was cleared (cotal_inbox peek).
		Peek bool `json:"peek,omitempty"`
		// RoleBacklog is how many requests for your role wait in its queue, not yet taken by
		// any holder (part of Remaining).
		RoleBacklog int `json:"roleBacklog,omitempty"`
	}
	sentOut struct {
		ID      string `json:"id"`
		Channel string `json:"channel,omitempty"`
		To      string `json:"to,omitempty"`
		ToID    string `json:"toId,omitempty"`
		Role    string `json:"role,omitempty"`
		Seq     uint64 `json:"seq,omitempty"`
		State   string `json:"recipientState,omitempty"`
	}
	statusOut struct {
		Status       string            `json:"status"`
		Activity     string            `json:"activity,omitempty"`
		Attention    string            `json:"attention"`
		ChannelModes map[string]string `json:"channelModes,omitempty"`
	}
	channelInfo struct {
		Name         string `json:"name"`
		Joined       bool   `json:"joined"`
		Messages     uint64 `json:"messages"`
		Description  string `json:"description,omitempty"`
		Instructions string `json:"instructions,omitempty"`
		Replay       *bool  `json:"replay,omitempty"`
		Durable      bool   `json:"durable,omitempty"`
	}
	channelsOut struct {
		Channels []channelInfo `json:"channels"`
	}
	joinedOut struct {
		Channel  string   `json:"channel"`
		Channels []string `json:"channels"`
	}
	connOut struct {
		State     string `json:"state"`
		Server    string `json:"server,omitempty"`
		Held      int    `json:"held"`
		Directed  int    `json:"heldDirect"`
		LastDrain string `json:"lastDrain,omitempty"`
		Push      bool   `json:"push"`
	}
)

func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// toolNames are the tools this server lists.
func (s *Server) toolNames() []string {
	names := append(slices.Clone(ToolNames), TaskToolNames...)
	if s.Turns != nil {
		names = append(names, YieldToolNames...)
	}
	if s.Manager == nil {
		return names
	}
	return append(names, ManagerToolNames...)
}

// addTools registers the cotal_* tools.
func (s *Server) addTools() {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_orientation", Title: "Cotal: who and where am I", Annotations: ro,
		Description: "Call first. Who you are (name, role, space), the channels you read and your default channel, who is present, your status and how many messages wait in your inbox."},
		s.orientation)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_roster", Title: "Cotal: who is here", Annotations: ro,
		Description: "Peers in the space with their role, status and activity, what runs them (harness, model), their working directory in the repository, the channels they read and the files they claimed."}, s.roster)
	inbox := toolSchema[inboxArgs](func(p map[string]*jsonschema.Schema) {
		p["asks"].Minimum, p["asks"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(float64(MaxInboxAsks))
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_inbox", Title: "Cotal: read your inbox", InputSchema: inbox,
		Description: "Returns and clears one bounded window of messages for you (nothing at all with peek): direct messages and role requests first, then channel traffic, then channel history. Call again while remaining > 0. Requests for your role come one at a time unless you pass asks to take several."},
		s.inboxTool)
	chArg := func(p map[string]*jsonschema.Schema) { p["channel"].MaxLength = maxLen(protocol.MaxChannelLength) }
	sendS := toolSchema[sendArgs](func(p map[string]*jsonschema.Schema) {
		chArg(p)
		textArg(p)
		p["replyTo"].MaxLength = maxLen(maxIDLength)
		p["mentions"].MaxItems = maxLen(MaxMentions)
		p["mentions"].Items.MaxLength = maxLen(protocol.MaxNameLength)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_send", Title: "Cotal: post to a channel", InputSchema: sendS,
		Description: "Post to a channel (default: the first channel you joined). Mentions wake the named peers. replyTo (a message id) makes the post a reply in that message's thread."}, s.send)
	dmS := toolSchema[dmArgs](func(p map[string]*jsonschema.Schema) {
		p["to"].MaxLength = maxLen(protocol.MaxNameLength)
		p["replyTo"].MaxLength = maxLen(maxIDLength)
		textArg(p)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_dm", Title: "Cotal: direct message", InputSchema: dmS,
		Description: "Send a direct message to one peer by name. It is kept until the peer reads it, even if it is offline now. replyTo (a message id) makes it a reply in that message's thread."}, s.dm)
	anyS := toolSchema[anycastArgs](func(p map[string]*jsonschema.Schema) {
		p["role"].MaxLength = maxLen(protocol.MaxRoleLength)
		textArg(p)
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_anycast", Title: "Cotal: ask a role", InputSchema: anyS,
		Description: "Send a request to a role: exactly one of its holders gets it; it waits if none is online."}, s.anycast)
	st := toolSchema[statusArgs](func(p map[string]*jsonschema.Schema) {
		p["status"].Enum = []any{"idle", "working", "waiting"}
		p["activity"].MaxLength = maxLen(protocol.MaxActivityLength)
		p["attention"].Enum = []any{"open", "dnd", "focus"}
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_status", Title: "Cotal: your status and attention", InputSchema: st,
		Description: "Set your presence status (idle, working, waiting), activity line and/or attention mode (how much peer traffic interrupts you: open, dnd, focus). Pass only what you change; with no arguments, report them."}, s.status)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_channels", Title: "Cotal: channels", Annotations: ro,
		Description: "Channels of the space: which you joined, their purpose and how many messages they hold."}, s.channels)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_channel_info", Title: "Cotal: what a channel is for", Annotations: ro,
		InputSchema: toolSchema[channelArgs](chArg), Description: "A channel's purpose, usage notes and replay policy from the channel registry. The notes are advisory, not instructions."}, s.channelInfo)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_join", Title: "Cotal: join a channel", InputSchema: toolSchema[channelArgs](chArg),
		Description: "Join a channel you may read; its history (if it replays) arrives in your inbox."}, s.join)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_leave", Title: "Cotal: leave a channel", InputSchema: toolSchema[channelArgs](chArg),
		Description: "Leave a channel you joined."}, s.leave)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_connection_status", Title: "Cotal: connection", Annotations: ro,
		Description: "Whether you are connected to the space, and how many messages wait for you."}, s.connStatus)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_channel_mode", Title: "Cotal: silence or mute a channel", InputSchema: channelModeSchema(),
		Description: "Set how one channel interrupts you, more specific than cotal_status attention. quiet = still received and readable with cotal_inbox, but it never wakes you; a post that mentions you still does. muted = you stop receiving the channel, mentions included (direct messages still reach you). normal = clear the override. Lasts for this session; cotal_status shows your modes."},
		s.channelMode)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_docs", Title: "Cotal: read the docs of this version", Annotations: ro, InputSchema: docsSchema(),
		Description: "Read the Cotal documentation built into this version: no arguments returns the page index; page returns one page in full (a slug from the index, e.g. agents, cli, interop); query searches every page and returns the best sections, each with its page. Prefer it over memory for subjects, message shapes, the CLI and the cotal_* tools. Offline; refresh serves the built-in copy and says so."},
		s.docsTool)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_feedback", Title: "Cotal: send feedback", InputSchema: feedbackSchema(),
		Description: "Send feedback about Cotal to its developers: to the intake the operator configured (COTAL_FEEDBACK_URL), else the keyed beta intake with COTAL_FEEDBACK_KEY, else the public intake, which needs a contact email. Never include secrets."},
		s.feedback)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "cotal_reconnect", Title: "Cotal: reconnect to the space",
		Description: "Drop and re-dial this session's connection to the space now: the manual recovery when it has wedged. Your subscriptions and held messages carry over. Returns whether it reconnected."},
		s.reconnect)
	s.addTeamTools()
	s.addReceiptTools()
	s.addClaimTools()
	s.addYieldTool()
}

// peerInfo is a roster entry as the model sees it: every string the peer chose is cut to
// its bound and escaped onto one line (peerText), in the text and the structured result.
func (s *Server) peerInfo(p client.Peer) PeerInfo {
	pi := PeerInfo{Name: peerText(p.Card.Name, shownName), ID: peerText(p.Card.ID, shownName), Kind: peerText(p.Card.Kind, shownWord),
		Role: peerText(p.Card.Role, shownToken), Status: string(p.State()), Activity: peerText(p.Activity, shownActivity),
		Harness: peerText(p.Harness(), shownWord), Online: p.Online, Ourselves: p.Card.ID == s.Endpoint.Principal().String(),
		Model: peerText(p.Model(), shownName)}
	if cwd, err := claims.Normalize(p.Cwd(), s.Repo); p.Cwd() != "" && err == nil {
		pi.Cwd = peerText(cwd, shownPath)
	}
	if p.Online {
		for i, ch := range p.Channels {
			if i == shownChannels {
				pi.Channels = append(pi.Channels, fmt.Sprintf("… [%d more]", len(p.Channels)-i))
				break
			}
			pi.Channels = append(pi.Channels, peerText(ch, protocol.MaxChannelLength))
		}
	}
	return pi
}

// withClaims adds the peer's claims (of by, keyed by holder id) to pi.
func withClaims(pi *PeerInfo, id string, by map[string][]claims.Claim) {
	for i, c := range by[id] {
		if i == shownClaims {
			pi.Claims = append(pi.Claims, ClaimRef{Path: fmt.Sprintf("… [%d more: cotal_claims]", len(by[id])-i)})
			break
		}
		pi.Claims = append(pi.Claims, ClaimRef{Path: peerText(c.Path, shownPath), Exclusive: c.Exclusive})
	}
}

// rosterLine is peerLine with what runs the peer, where, what it reads and what it
// claims, in brackets after its status; its activity, free text, stays last.
func rosterLine(p PeerInfo) string {
	var parts []string
	if run := strings.TrimSpace(p.Harness + " " + p.Model); run != "" {
		parts = append(parts, "runs "+run)
	}
	if p.Cwd != "" {
		parts = append(parts, "in "+p.Cwd)
	}
	if len(p.Channels) > 0 {
		parts = append(parts, "reads "+strings.Join(p.Channels, ", "))
	}
	if len(p.Claims) > 0 {
		var cs []string
		for _, c := range p.Claims {
			cs = append(cs, c.Path+" ("+kindWord(c.Exclusive)+")")
		}
		parts = append(parts, "claims "+strings.Join(cs, ", "))
	}
	if len(p.Tasks) > 0 {
		parts = append(parts, "tasks "+strings.Join(p.Tasks, ", "))
	}
	if len(parts) == 0 {
		return peerLine(p)
	}
	q := p
	q.Status += " [" + strings.Join(parts, "; ") + "]"
	return peerLine(q)
}

func peerLine(p PeerInfo) string {
	var b strings.Builder
	b.WriteString(p.Name)
	if p.Role != "" {
		b.WriteString(" (" + p.Role + ")")
	}
	b.WriteString(" " + p.Status)
	if p.Activity != "" {
		b.WriteString(": " + p.Activity)
	}
	if p.Ourselves {
		b.WriteString(" [you]")
	}
	return b.String()
}

func (s *Server) orientation(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, orientationOut, error) {
	ep := s.Endpoint
	card := ep.Card()
	peers, err := ep.Roster(ctx)
	if err != nil {
		return nil, orientationOut{}, fmt.Errorf("roster: %w", err)
	}
	out := orientationOut{Name: card.Name, ID: card.ID, Role: card.Role, Space: ep.Space(), Channels: ep.Channels(),
		PostTo: s.defaultChannel(), Status: string(protocol.StatusIdle), Push: s.push.Load(), Tools: s.toolNames(),
		Connected: ep.Conn().IsConnected(), Present: []PeerInfo{}}
	for _, p := range peers {
		pi := s.peerInfo(p)
		if pi.Ourselves {
			out.Status, out.Activity = string(p.Status), pi.Activity
		}
		if p.Online {
			out.Present = append(out.Present, pi)
		}
	}
	out.Unread, out.Directed = s.box.counts()
	out.Backlog = s.roleBacklog(ctx)
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s (%s)", out.Name, out.ID)
	if out.Role != "" {
		fmt.Fprintf(&b, ", role %s", out.Role)
	}
	fmt.Fprintf(&b, ", on space %s. Status %s.\n", out.Space, out.Status)
	fmt.Fprintf(&b, "Channels: %s", strings.Join(out.Channels, ", "))
	if out.PostTo != "" {
		fmt.Fprintf(&b, " (cotal_send posts to %s by default)", out.PostTo)
	}
	b.WriteString(".\nPresent:")
	for _, p := range out.Present {
		b.WriteString("\n  " + peerLine(p))
	}
	fmt.Fprintf(&b, "\nInbox: %d waiting (%d direct).", out.Unread, out.Directed)
	if out.Backlog > 0 {
		fmt.Fprintf(&b, " %d more requests wait in the queue of your role %s.", out.Backlog, out.Role)
	}
	if out.Unread+out.Backlog > 0 {
		b.WriteString(" Read them with cotal_inbox.")
	}
	return text("%s", b.String()), out, nil
}

func (s *Server) roster(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, rosterOut, error) {
	peers, err := s.Endpoint.Roster(ctx)
	if err != nil {
		return nil, rosterOut{}, fmt.Errorf("roster: %w", err)
	}
	out := rosterOut{Peers: []PeerInfo{}}
	lines := []string{}
	held := s.peerClaims(ctx)
	var holding map[string][]string // task ids by holder
	if b, err := s.board(ctx); err == nil {
		if all, err := b.List(ctx); err == nil {
			holding = taskboard.HeldBy(all)
		}
	}
	for _, p := range peers {
		pi := s.peerInfo(p)
		withClaims(&pi, p.Card.ID, held)
		pi.Tasks = holding[p.Card.ID]
		out.Peers = append(out.Peers, pi)
		lines = append(lines, rosterLine(pi))
		delete(held, p.Card.ID)
	}
	// Holders gone from presence (killed, or away past its TTL) whose claims still live.
	for _, id := range slices.Sorted(maps.Keys(held)) {
		pi := PeerInfo{Name: peerText(held[id][0].Name, shownName), ID: peerText(id, shownName), Status: string(protocol.StatusOffline)}
		withClaims(&pi, id, held)
		out.Peers = append(out.Peers, pi)
		lines = append(lines, rosterLine(pi))
	}
	if len(lines) == 0 {
		return text("Nobody is in the roster."), out, nil
	}
	return text("%s", strings.Join(lines, "\n")), out, nil
}

// item renders a message for the model.
func item(in *client.Incoming) Item {
	it := Item{ID: in.ID, Kind: kindOf(in), From: sender(in), FromID: in.Subject.Sender.String(),
		Time: time.UnixMilli(in.TS).UTC().Format(time.RFC3339), Text: bodyOf(in), Mentions: in.Mentions,
		ReplyTo: in.ReplyTo, Thread: threadOf(in.Message), Historical: in.Historical}
	decorate(&it, in)
	switch in.Kind {
	case protocol.DeliveryChannel:
		it.Channel = in.Subject.Channel
	case protocol.DeliveryAnycast:
		it.Role = in.Subject.Role
	}
	for _, p := range in.Parts {
		switch p.Kind {
		case protocol.PartData:
			it.Data = append(it.Data, p.Data)
		case protocol.PartArtifact:
			it.Artifacts = append(it.Artifacts, ArtifactRef{Name: p.Name, MediaType: p.MediaType, Digest: p.Digest, Size: p.Size})
		}
	}
	return it
}

func (s *Server) inboxTool(ctx context.Context, _ *mcp.CallToolRequest, a inboxArgs) (*mcp.CallToolResult, inboxOut, error) {
	if a.Asks < 0 || a.Asks > MaxInboxAsks {
		return nil, inboxOut{}, fmt.Errorf("asks %d: take 1 to %d requests at once; nothing was read", a.Asks, MaxInboxAsks)
	}
	if a.Peek {
		return s.peekInbox(ctx)
	}
	s.takeAsks(ctx, a.Asks)
	window := s.box.take(s.WindowItems, s.WindowBytes, time.Now().UnixMilli())
	out := inboxOut{Messages: []Item{}}
	var b strings.Builder
	for _, in := range window {
		it, line := shown(in)
		out.Messages = append(out.Messages, it)
		b.WriteString(line)
		b.WriteString("\n")
		s.log.addIncoming(in) // cotal_thread and cotal_message find it as soon as the model can ask
		s.rc.given(in)
	}
	held, _ := s.box.counts()
	// Read before the window is acked (once its result is written): until then the
	// endpoint takes no more, so no ask is in flight between the role's queue and the
	// inbox, and none is counted twice.
	out.RoleBacklog = s.roleBacklog(ctx)
	out.Remaining = held + out.RoleBacklog
	switch {
	case len(window) == 0 && out.Remaining == 0:
		b.WriteString("Your inbox is empty.")
	case out.RoleBacklog > 0:
		fmt.Fprintf(&b, "%d more waiting, %d of them requests for your role %s: call cotal_inbox again (asks takes up to %d requests at once).",
			out.Remaining, out.RoleBacklog, s.Endpoint.Card().Role, MaxInboxAsks)
	case out.Remaining > 0:
		fmt.Fprintf(&b, "%d more waiting: call cotal_inbox again.", out.Remaining)
	}
	res := text("%s", strings.TrimRight(b.String(), "\n"))
	if len(window) > 0 {
		// Acked only once the result is written to the client (see watchedConn.Write): a
		// client gone before then never had it, and the window is handed back.
		id, ok := s.box.await(window)
		if !ok { // the session ended while this result was built: nobody will read it
			for _, in := range window {
				s.Endpoint.HandBack(in)
			}
			return nil, inboxOut{}, errors.New("the session is closing")
		}
		res.Meta = mcp.Meta{WindowMeta: id}
	}
	return res, out, nil
}

// peekInbox shows the window cotal_inbox would return, clearing nothing: no copy is
// acked, no request is taken from the role's queue, and the next read returns it again.
func (s *Server) peekInbox(ctx context.Context) (*mcp.CallToolResult, inboxOut, error) {
	window := s.box.peek(s.WindowItems, s.WindowBytes)
	out := inboxOut{Messages: []Item{}, Peek: true}
	var b strings.Builder
	for _, in := range window {
		it, line := shown(in)
		out.Messages = append(out.Messages, it)
		b.WriteString(line)
		b.WriteString("\n")
	}
	held, _ := s.box.counts()
	out.RoleBacklog = s.roleBacklog(ctx)
	out.Remaining = held - len(window) + out.RoleBacklog
	switch {
	case len(window) == 0 && out.Remaining == 0:
		b.WriteString("Your inbox is empty.")
	case len(window) == 0:
		fmt.Fprintf(&b, "Peek: nothing held yet; %d requests for your role wait in its queue (cotal_inbox takes them).", out.RoleBacklog)
	default:
		fmt.Fprintf(&b, "Peek: %d shown, nothing cleared; %d more waiting. Call cotal_inbox without peek to take this window.", len(window), out.Remaining)
	}
	return text("%s", strings.TrimRight(b.String(), "\n")), out, nil
}

// readInbox serves InboxURI: what is held, without clearing it.
func (s *Server) readInbox(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	n, directed := s.box.counts()
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain",
		Text: fmt.Sprintf("%d messages waiting (%d direct). Call cotal_inbox to read and clear them.", n, directed)}}}, nil
}

func checkText(t string) error {
	if strings.TrimSpace(t) == "" {
		return errors.New("text is empty: write the message in text")
	}
	return checkBounds(t, nil)
}

func (s *Server) send(ctx context.Context, _ *mcp.CallToolRequest, a sendArgs) (*mcp.CallToolResult, sentOut, error) {
	if err := checkText(a.Text); err != nil {
		return nil, sentOut{}, err
	}
	if err := checkBounds("", a.Mentions); err != nil {
		return nil, sentOut{}, err
	}
	ch := a.Channel
	if ch == "" {
		if ch = s.defaultChannel(); ch == "" {
			return nil, sentOut{}, errors.New("no channel given and you joined none: pass channel, or cotal_join one first")
		}
	}
	if err := protocol.CheckConcreteChannel(ch); err != nil {
		return nil, sentOut{}, fmt.Errorf("channel %q: %w", ch, err)
	}
	d := client.Text(a.Text)
	if err := s.reply(ctx, &d, a.ReplyTo, ch); err != nil {
		return nil, sentOut{}, err
	}
	if len(a.Mentions) > 0 {
		peers, err := s.Endpoint.Roster(ctx)
		if err != nil {
			return nil, sentOut{}, fmt.Errorf("check mentions: %w", err)
		}
		for _, m := range a.Mentions {
			if !slices.ContainsFunc(peers, func(p client.Peer) bool { return strings.EqualFold(p.Card.Name, m) || p.Card.ID == m }) {
				return nil, sentOut{}, fmt.Errorf("mention %q is not in the roster: nothing was sent; cotal_roster lists the peers", m)
			}
		}
		d.Mentions = a.Mentions
	}
	sent, err := s.Endpoint.Post(ctx, ch, d)
	if err != nil {
		return nil, sentOut{}, fmt.Errorf("post to %s: %w", ch, err)
	}
	s.record(protocol.DeliveryChannel, ch, d, sent)
	out := sentOut{ID: sent.ID, Channel: ch, Seq: sent.Seq}
	note := ""
	if !slices.Contains(s.Endpoint.Channels(), ch) {
		note = " (you have not joined it, so you will not see replies there; cotal_join to follow it)"
	}
	return text("Posted to %s%s (id %s).", ch, note, sent.ID), out, nil
}

func (s *Server) dm(ctx context.Context, _ *mcp.CallToolRequest, a dmArgs) (*mcp.CallToolResult, sentOut, error) {
	if err := checkText(a.Text); err != nil {
		return nil, sentOut{}, err
	}
	if a.To == "" {
		return nil, sentOut{}, errors.New("to is empty: name the peer (cotal_roster lists them)")
	}
	t, err := s.Endpoint.Resolve(ctx, a.To)
	if err != nil {
		return nil, sentOut{}, fmt.Errorf("find %q: %w", a.To, err)
	}
	d := client.Text(a.Text)
	if err := s.reply(ctx, &d, a.ReplyTo, ""); err != nil {
		return nil, sentOut{}, err
	}
	sent, err := s.Endpoint.DM(ctx, t.Principal, d)
	if err != nil {
		return nil, sentOut{}, fmt.Errorf("dm %s: %w", t.Name, err)
	}
	s.record(protocol.DeliveryDM, t.Principal.String(), d, sent)
	s.rc.noteSent(sent.ID, sentDM{to: t.Principal, name: t.Name, at: time.Now(), seq: sent.Seq})
	out := sentOut{ID: sent.ID, To: t.Name, ToID: t.Principal.String(), Seq: sent.Seq, State: string(t.State)}
	return text("Sent to %s (%s); it is kept until they read it (id %s).", t.Name, t.State, sent.ID), out, nil
}

func (s *Server) anycast(ctx context.Context, _ *mcp.CallToolRequest, a anycastArgs) (*mcp.CallToolResult, sentOut, error) {
	if err := checkText(a.Text); err != nil {
		return nil, sentOut{}, err
	}
	if err := protocol.CheckRole(a.Role); err != nil {
		return nil, sentOut{}, err
	}
	d := client.Text(a.Text)
	sent, err := s.Endpoint.Ask(ctx, a.Role, d)
	if err != nil {
		return nil, sentOut{}, fmt.Errorf("anycast %s: %w", a.Role, err)
	}
	s.record(protocol.DeliveryAnycast, a.Role, d, sent)
	return text("Sent to role %s; one of its holders will get it.", a.Role), sentOut{ID: sent.ID, Role: a.Role, Seq: sent.Seq}, nil
}

func (s *Server) status(ctx context.Context, _ *mcp.CallToolRequest, a statusArgs) (*mcp.CallToolResult, statusOut, error) {
	ep := s.Endpoint
	if a.Status != "" {
		st := protocol.Status(a.Status)
		if st == protocol.StatusOffline || !st.Valid() {
			return nil, statusOut{}, fmt.Errorf("status %q: use idle, working or waiting", a.Status)
		}
		if err := ep.SetStatus(ctx, st); err != nil {
			return nil, statusOut{}, fmt.Errorf("set status: %w", err)
		}
	}
	if a.Attention != "" {
		if _, ok := attentionText[protocol.Attention(a.Attention)]; !ok {
			return nil, statusOut{}, fmt.Errorf("attention %q: use open, dnd or focus; nothing changed", a.Attention)
		}
	}
	if a.Activity != nil {
		if err := ep.SetActivity(ctx, *a.Activity); err != nil {
			return nil, statusOut{}, fmt.Errorf("set activity: %w", err)
		}
	}
	if a.Attention != "" {
		if err := s.setAttention(ctx, a.Attention); err != nil {
			return nil, statusOut{}, err
		}
	}
	p, ok := s.selfPeer(ctx)
	if !ok {
		return nil, statusOut{}, errors.New("your presence record is not in the roster yet; try again")
	}
	mode, modes := s.att.get()
	out := statusOut{Status: string(p.Status), Activity: peerText(p.Activity, shownActivity), Attention: string(mode), ChannelModes: modes}
	line := "You are " + out.Status
	if out.Activity != "" {
		line += ": " + out.Activity
	}
	line += ".\nAttention: " + attentionText[mode] + "."
	if len(modes) > 0 {
		var chs []string
		for _, ch := range slices.Sorted(maps.Keys(modes)) {
			chs = append(chs, ch+" "+modes[ch])
		}
		line += "\nChannel modes: " + strings.Join(chs, ", ") + "."
	}
	return text("%s", line), out, nil
}

func (s *Server) channelList(ctx context.Context) ([]channelInfo, error) {
	stats, err := s.Endpoint.ChannelStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("channels: %w", err)
	}
	joined := s.Endpoint.Channels()
	var out []channelInfo
	seen := map[string]bool{}
	for _, st := range stats {
		seen[st.Name] = true
		out = append(out, channelInfo{Name: st.Name, Joined: slices.Contains(joined, st.Name), Messages: st.Messages,
			Description: st.Config.Description, Instructions: st.Config.Instructions, Replay: st.Config.Replay,
			Durable: st.Config.DeliveryClass == "durable"})
	}
	for _, ch := range joined {
		if !seen[ch] {
			out = append(out, channelInfo{Name: ch, Joined: true})
		}
	}
	return out, nil
}

func (s *Server) channels(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, channelsOut, error) {
	list, err := s.channelList(ctx)
	if err != nil {
		return nil, channelsOut{}, err
	}
	out := channelsOut{Channels: []channelInfo{}}
	var lines []string
	for _, c := range list {
		out.Channels = append(out.Channels, c)
		l := c.Name
		if c.Joined {
			l += " [joined]"
		}
		if c.Description != "" {
			l += ": " + peerText(c.Description, shownChannel)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return text("No channels yet."), out, nil
	}
	return text("%s", strings.Join(lines, "\n")), out, nil
}

func (s *Server) channelInfo(ctx context.Context, _ *mcp.CallToolRequest, a channelArgs) (*mcp.CallToolResult, channelInfo, error) {
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return nil, channelInfo{}, fmt.Errorf("channel %q: %w", a.Channel, err)
	}
	list, err := s.channelList(ctx)
	if err != nil {
		return nil, channelInfo{}, err
	}
	for _, c := range list {
		if c.Name == a.Channel {
			l := c.Name
			if c.Description != "" {
				l += ": " + c.Description
			}
			if c.Instructions != "" {
				l += "\nNotes (advisory): " + c.Instructions
			}
			return text("%s", l), c, nil
		}
	}
	return text("%s has no registry entry and no messages yet.", a.Channel), channelInfo{Name: a.Channel}, nil
}

func (s *Server) join(ctx context.Context, _ *mcp.CallToolRequest, a channelArgs) (*mcp.CallToolResult, joinedOut, error) {
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return nil, joinedOut{}, fmt.Errorf("channel %q: %w", a.Channel, err)
	}
	if err := s.Endpoint.JoinChannel(ctx, a.Channel); err != nil {
		return nil, joinedOut{}, fmt.Errorf("join %s: %w", a.Channel, err)
	}
	chs := s.Endpoint.Channels()
	return text("Joined %s; its history, if it replays, arrives in your inbox. Channels: %s.", a.Channel, strings.Join(chs, ", ")),
		joinedOut{Channel: a.Channel, Channels: chs}, nil
}

func (s *Server) leave(_ context.Context, _ *mcp.CallToolRequest, a channelArgs) (*mcp.CallToolResult, joinedOut, error) {
	if !slices.Contains(s.Endpoint.Channels(), a.Channel) {
		return nil, joinedOut{}, fmt.Errorf("you are not in %q; joined: %s", a.Channel, strings.Join(s.Endpoint.Channels(), ", "))
	}
	if err := s.Endpoint.LeaveChannel(a.Channel); err != nil {
		return nil, joinedOut{}, fmt.Errorf("leave %s: %w", a.Channel, err)
	}
	chs := s.Endpoint.Channels()
	return text("Left %s. Channels: %s.", a.Channel, strings.Join(chs, ", ")), joinedOut{Channel: a.Channel, Channels: chs}, nil
}

func (s *Server) connStatus(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, connOut, error) {
	nc := s.Endpoint.Conn()
	out := connOut{State: "disconnected", Push: s.push.Load()}
	switch {
	case nc.IsConnected():
		out.State, out.Server = "ready", nc.ConnectedUrlRedacted()
	case nc.IsReconnecting():
		out.State = "connecting"
	case nc.IsClosed():
		out.State = "stopped"
	}
	out.Held, out.Directed = s.box.counts()
	if d := s.box.lastDrain(); d > 0 {
		out.LastDrain = time.UnixMilli(d).UTC().Format(time.RFC3339)
	}
	return text("%s; %d waiting in your inbox (%d direct).", out.State, out.Held, out.Directed), out, nil
}
