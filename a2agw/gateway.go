// Package a2agw is the inbound A2A gateway (cotal a2a): it makes the agents and roles of
// one space reachable by any Agent2Agent (A2A v0.3) client over JSON-RPC 2.0. Each exposed
// name gets an Agent Card built from its presence card; a message to a role becomes a
// cotal anycast ask, to an agent a DM, both sent as the gateway's own identity; the
// agent's replies (replyTo the sent message) come back as task status updates and
// artifacts. Tasks live in the space's cotal_a2a_<space> bucket, so a gateway that
// restarts mid-task still completes the task when the reply arrives.
package a2agw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/taskboard"
)

// Config is what a Gateway serves and how.
type Config struct {
	Endpoint *client.Endpoint   // the gateway's own identity, joined; required
	Bucket   jetstream.KeyValue // the space's cotal_a2a_<space> bucket; required
	// Expose are the names callers may address: "role:NAME", "agent:NAME", or a bare
	// NAME (a role some peer holds, else an agent of that name, else a role).
	Expose []string
	// BaseURL is the gateway's address as callers reach it (http://127.0.0.1:7800): the
	// cards' url fields are built from it.
	BaseURL string
	// Port is the port the gateway listens on: a Host header naming another is refused.
	Port int
	// Hosts are DNS names, beyond localhost, a request's Host may name (--allow-host).
	Hosts []string
	// Bearer, when set, checks the bearer token every JSON-RPC request must carry (off
	// loopback): the cards then declare the bearer scheme.
	Bearer func(token string) bool
	// AllowRemotePush lets push notifications go to addresses off loopback.
	AllowRemotePush bool
	// BlockFor bounds how long a blocking message/send waits for the task to settle
	// (completed, failed, canceled or input-required); 0 means 60 s. The task is returned
	// as it is then.
	BlockFor time.Duration
	Logger   *slog.Logger     // nil discards
	Now      func() time.Time // nil means time.Now
	Push     *http.Client     // nil: a client that only dials allowed addresses
	// Board, when set, is the space's task board as the gateway's identity: a task for a
	// role is mirrored there (board.go). Nil mirrors nothing.
	Board *taskboard.Board
}

// Gateway serves A2A over a space. Make one with New, run Run for its replies, and serve
// Handler over HTTP.
type Gateway struct {
	cfg   Config
	st    store
	log   *slog.Logger
	now   func() time.Time
	push  *pusher
	mu    sync.Mutex
	watch map[string][]chan any // task id -> stream subscribers

	afterSend func(taskID string) // tests: runs once a task's message went out, before its state is set
}

// New checks cfg and returns its gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Endpoint == nil || cfg.Bucket == nil {
		return nil, errors.New("a2a gateway: an endpoint and the task bucket are required")
	}
	for _, e := range cfg.Expose {
		if err := CheckExpose(e); err != nil {
			return nil, err
		}
	}
	if cfg.BlockFor == 0 {
		cfg.BlockFor = time.Minute
	}
	g := &Gateway{cfg: cfg, st: store{kv: cfg.Bucket}, log: cfg.Logger, now: cfg.Now, watch: map[string][]chan any{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.push = newPusher(cfg.Push, cfg.AllowRemotePush, g.log)
	return g, nil
}

// CheckExpose accepts one --expose value: role:NAME, agent:NAME or NAME, where NAME is a
// role or an actor name.
func CheckExpose(e string) error {
	kind, name := splitExpose(e)
	ok := protocol.CheckRole(name) == nil || protocol.ValidActor(name)
	if kind == "agent" {
		ok = protocol.ValidActor(name) || protocol.CheckDisplayName(name) == nil && !strings.ContainsAny(name, "/ ?#%")
	}
	if name == "" || !ok || len(name) > 64 {
		return fmt.Errorf("--expose %q: want role:NAME, agent:NAME or NAME, a role or an agent's name (letters, digits, _ and -)", e)
	}
	return nil
}

func splitExpose(e string) (kind, name string) {
	if k, n, ok := strings.Cut(e, ":"); ok && (k == "role" || k == "agent") {
		return k, n
	}
	return "", e
}

// exposedName is the name an --expose value is served under (/agents/<name>).
func exposedName(e string) string { _, n := splitExpose(e); return n }

// target is an exposed name resolved against the roster: a role, or one agent.
type target struct {
	name string
	role string
	peer *client.Peer // the agent, or the role's first holder (for its card)
}

// resolve finds what an exposed name stands for now.
func (g *Gateway) resolve(ctx context.Context, name string) (target, error) {
	var entry string
	for _, e := range g.cfg.Expose {
		if exposedName(e) == name {
			entry = e
		}
	}
	if entry == "" {
		return target{}, errNotExposed
	}
	kind, _ := splitExpose(entry)
	peers, err := g.cfg.Endpoint.Roster(ctx)
	if err != nil {
		return target{}, fmt.Errorf("roster: %w", err)
	}
	var holder, agent *client.Peer
	for i := range peers {
		p := &peers[i]
		if p.Card.ID == g.cfg.Endpoint.Principal().String() {
			continue
		}
		if p.Card.Role == name && (holder == nil || p.Online && !holder.Online) {
			holder = p
		}
		if (p.Card.Name == name || p.Card.Actor == name || strings.HasSuffix(p.Card.ID, "."+name)) && (agent == nil || p.Online && !agent.Online) {
			agent = p
		}
	}
	switch {
	case kind == "role" || kind == "" && holder != nil:
		return target{name: name, role: name, peer: holder}, nil
	case agent != nil:
		return target{name: name, peer: agent}, nil
	case kind == "agent":
		return target{}, fmt.Errorf("agent %q is not in the roster of space %s", name, g.cfg.Endpoint.Space())
	case protocol.CheckRole(name) == nil:
		return target{name: name, role: name}, nil // an ask waits for a future holder
	}
	return target{}, fmt.Errorf("%q is neither a role nor an agent of space %s", name, g.cfg.Endpoint.Space())
}

var errNotExposed = errors.New("not exposed")

// Run handles the replies the gateway's identity receives until ctx ends or the endpoint
// is lost. A reply is acknowledged once its task is stored, so one that arrives while the
// bucket cannot be written is delivered again.
func (g *Gateway) Run(ctx context.Context) error {
	pushDone := make(chan struct{})
	go func() { g.push.run(ctx); close(pushDone) }()
	defer func() { <-pushDone }()
	renewDone := make(chan struct{})
	go func() { g.renewBoard(ctx); close(renewDone) }()
	defer func() { <-renewDone }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.cfg.Endpoint.Lost():
			return fmt.Errorf("a2a gateway: connection lost: %w", g.cfg.Endpoint.LostErr())
		case in, ok := <-g.cfg.Endpoint.Messages():
			if !ok {
				return nil
			}
			if err := g.onReply(ctx, in); err != nil {
				g.log.Warn("a2a gateway: reply not stored; it will be delivered again", "id", in.ID, "err", err)
				_ = in.Nak()
				continue
			}
			_ = in.Ack()
		}
	}
}

// replyState is the task state a reply sets: a part {"kind":"ai.cotal.a2a-state",
// "state":S} names it, else a first text part starting with [input-required], [working]
// or [failed] does (the marker is removed); otherwise the reply completes the task.
func replyState(m *protocol.Message) string {
	for _, p := range m.Parts {
		if p.Kind != StatePartKind {
			continue
		}
		var s struct {
			State string `json:"state"`
		}
		if json.Unmarshal(p.Raw, &s) == nil && slices.Contains([]string{StateWorking, StateInputRequired, StateCompleted, StateFailed}, s.State) {
			return s.State
		}
	}
	for i, p := range m.Parts {
		if p.Kind != protocol.PartText {
			continue
		}
		for _, st := range []string{StateInputRequired, StateWorking, StateFailed} {
			if rest, ok := strings.CutPrefix(strings.TrimLeft(p.Text, " \n"), "["+st+"]"); ok {
				m.Parts[i].Text = strings.TrimLeft(rest, " ")
				return st
			}
		}
		break
	}
	return StateCompleted
}

// StatePartKind is the kind of the extension part with which an agent's reply names the
// task state it sets (docs/a2a.md).
const StatePartKind = "ai.cotal.a2a-state"

// onReply applies one received message to its task, when it answers one.
func (g *Gateway) onReply(ctx context.Context, in *client.Incoming) error {
	if in.ReplyTo == "" {
		return nil
	}
	id, err := g.st.taskOf(ctx, in.ReplyTo)
	if errors.Is(err, errNoTask) {
		return nil
	}
	if err != nil {
		return err
	}
	sender := in.Subject.Sender.String()
	msg := in.Message
	state := replyState(&msg)
	var events []any
	r, changed, err := g.st.update(ctx, id, func(r *record) (bool, error) {
		events = nil
		if terminal(r.Task.Status.State) || slices.Contains(historyIDs(r.Task), msg.ID) {
			return false, nil
		}
		if r.Peer != "" && sender != r.Peer {
			g.log.Warn("a2a gateway: a reply to a task from another peer than its agent is ignored", "task", id, "from", sender)
			return false, nil
		}
		am := Message{Kind: "message", MessageID: msg.ID, Role: "agent", Parts: fromCotal(msg.Parts), TaskID: id, ContextID: r.Task.ContextID}
		r.Task.History = appendHistory(r.Task.History, am)
		r.LastReply, r.Replier = msg.ID, sender
		if state == StateCompleted && len(am.Parts) > 0 {
			a := Artifact{ArtifactID: msg.ID, Name: "reply", Parts: am.Parts}
			r.Task.Artifacts = append(r.Task.Artifacts, a)
			events = append(events, ArtifactUpdate{Kind: "artifact-update", TaskID: id, ContextID: r.Task.ContextID, Artifact: a, LastChunk: true})
		}
		r.Task.Status = TaskStatus{State: state, Message: &am, Timestamp: g.stamp()}
		r.Updated = g.now().UnixMilli()
		events = append(events, g.statusEvent(r))
		return true, nil
	})
	if err != nil || !changed {
		return err
	}
	g.publish(ctx, r, events)
	return nil
}

// historyIDs lists the message ids of t's history.
func historyIDs(t Task) []string {
	ids := make([]string, len(t.History))
	for i, m := range t.History {
		ids[i] = m.MessageID
	}
	return ids
}

func appendHistory(h []Message, m Message) []Message {
	h = append(h, m)
	if len(h) > maxHistory {
		h = h[len(h)-maxHistory:]
	}
	return h
}

func (g *Gateway) stamp() string { return g.now().UTC().Format(time.RFC3339Nano) }

// statusEvent is the status-update event of r's current status; it is final once the
// task waits for the caller or has ended.
func (g *Gateway) statusEvent(r *record) StatusUpdate {
	st := r.Task.Status.State
	return StatusUpdate{Kind: "status-update", TaskID: r.Task.ID, ContextID: r.Task.ContextID, Status: r.Task.Status,
		Final: terminal(st) || st == StateInputRequired}
}

// publish hands a task's events to its streams and its push notification, and ends its
// board task when it ended.
func (g *Gateway) publish(ctx context.Context, r *record, events []any) {
	g.mu.Lock()
	subs := g.watch[r.Task.ID]
	for _, ch := range subs {
		for _, ev := range events {
			select {
			case ch <- ev:
			default: // a stalled stream loses events; tasks/get still tells the state
			}
		}
	}
	g.mu.Unlock()
	if r.Push != nil {
		g.push.enqueue(*r.Push, r.Task)
	}
	g.closeBoardTask(ctx, r)
}

// subscribe returns a channel of r's events and its cancel.
func (g *Gateway) subscribe(id string) (<-chan any, func()) {
	ch := make(chan any, 64)
	g.mu.Lock()
	g.watch[id] = append(g.watch[id], ch)
	g.mu.Unlock()
	return ch, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.watch[id] = slices.DeleteFunc(g.watch[id], func(c chan any) bool { return c == ch })
		if len(g.watch[id]) == 0 {
			delete(g.watch, id)
		}
	}
}

// fromCotal turns a cotal message's parts into A2A parts: text as text, data as data (an
// object as it is, any other value under "value"), an artifact reference as data; the
// state part and unknown extension parts are left out.
func fromCotal(parts []protocol.Part) []Part {
	var out []Part
	for _, p := range parts {
		switch p.Kind {
		case protocol.PartText:
			out = append(out, Part{Kind: "text", Text: p.Text})
		case protocol.PartData:
			d := p.Data
			if len(d) == 0 || d[0] != '{' {
				d, _ = json.Marshal(map[string]json.RawMessage{"value": p.Data})
			}
			out = append(out, Part{Kind: "data", Data: d})
		case protocol.PartArtifact:
			d, _ := json.Marshal(map[string]any{"artifact": map[string]any{"name": p.Name, "mediaType": p.MediaType, "digest": p.Digest, "size": p.Size}})
			out = append(out, Part{Kind: "data", Data: d})
		}
	}
	return out
}

// toCotal turns a caller's parts into cotal parts: text and data; a file part is refused
// (the mesh carries no caller's bytes or URLs as files).
func toCotal(parts []Part) ([]protocol.Part, error) {
	if len(parts) == 0 || len(parts) > 32 {
		return nil, &rpcError{codeInvalidParams, "message.parts: want 1 to 32 parts"}
	}
	out := make([]protocol.Part, 0, len(parts))
	for i, p := range parts {
		switch p.Kind {
		case "text":
			out = append(out, protocol.TextPart(p.Text))
		case "data":
			if len(p.Data) == 0 || p.Data[0] != '{' {
				return nil, &rpcError{codeInvalidParams, fmt.Sprintf("message.parts[%d]: a data part's data is a JSON object", i)}
			}
			out = append(out, protocol.Part{Kind: protocol.PartData, Data: p.Data})
		case "file":
			return nil, &rpcError{codeContentNotSupp, fmt.Sprintf("message.parts[%d]: file parts are not carried: send text or data", i)}
		default:
			return nil, &rpcError{codeInvalidParams, fmt.Sprintf("message.parts[%d]: kind %q: want text or data", i, p.Kind)}
		}
	}
	return out, nil
}
