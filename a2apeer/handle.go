package a2apeer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// MaxAnswer bounds the text of one answer DM (the agent's parts, joined); a longer
// answer is cut and says so.
const MaxAnswer = 64 << 10

// tries is how many times a call that failed transiently is made in all.
const tries = 3

// handle sends one DM or anycast to the agent and answers its asker.
func (p *peer) handle(ctx context.Context, ep *client.Endpoint, c *Caller, in *client.Incoming) {
	asker, err := protocol.ParsePrincipal(in.From.ID)
	if err != nil { // the receive checks make this impossible; drop it rather than guess
		_ = in.Ack()
		return
	}
	m := p.message(in)
	res, err := p.send(ctx, c, m)
	if ctx.Err() != nil {
		// The bridge stops: handed back (naked at Close, once the endpoint no longer
		// consumes), so the next bridge sends it (the same messageId); a Nak now would come
		// back to this closing endpoint and wait out its ack wait.
		ep.HandBack(in)
		return
	}
	if err != nil {
		_ = in.Ack()
		p.log.Warn("a2a call failed", "from", in.From.ID, "err", err)
		p.answer(ctx, ep, asker, in, "", fmt.Sprintf("[a2a] %s did not take the message: %v", p.reg.Name, err))
		return
	}
	t := res.Task
	var rec *TaskRecord
	if res.Message == nil && !Settled(t.Status.State) {
		// Recorded before the ack: a bridge that stops while following it leaves the
		// record, and the next one follows the task again.
		r := TaskRecord{Peer: p.reg.Name, Task: t.ID, TaskContext: t.ContextID, From: in.From.ID, Message: in.ID,
			Context: in.ContextID, Accepted: p.b.now().UnixMilli()}
		if err := r.Check(); err != nil {
			p.log.Warn("a2a task not recorded", "task", t.ID, "err", err)
		} else if err := p.record(ctx, r); err != nil {
			p.log.Warn("a2a task not recorded", "err", err)
		} else {
			rec = &r
		}
	}
	// Accepted: the agent has it now, so the cotal copy is done.
	if err := in.Ack(); err != nil {
		p.log.Warn("ack", "err", err)
	}
	if res.Message != nil {
		p.remember(in.From.ID, res.Message.ContextID, nil)
		p.answer(ctx, ep, asker, in, res.Message.ContextID, text(res.Message.Parts))
		return
	}
	if !Settled(t.Status.State) {
		t = p.follow(ctx, c, t, p.b.now().Add(orDefault(p.b.TaskTimeout, 30*time.Minute)))
		if ctx.Err() != nil {
			return // the task goes on at the agent; its record lets the next bridge relay it
		}
	}
	p.remember(in.From.ID, t.ContextID, t)
	if rec != nil {
		p.settle(ctx, ep, asker, *rec, t)
		return
	}
	p.answer(ctx, ep, asker, in, t.ContextID, taskText(p.reg.Name, t))
}

// message is in as an A2A message: its id is the cotal id (so a resend after a bridge
// restart is the same message), its context the cotal one, else the asker's last
// exchange; and it continues the task that asked this asker something, if any.
func (p *peer) message(in *client.Incoming) Message {
	m := Message{Kind: "message", MessageID: in.ID, Role: "user", Parts: parts(in.Parts), ContextID: in.ContextID,
		Metadata: map[string]any{"cotal": map[string]any{"space": p.b.Space, "from": in.From.ID, "fromName": in.From.Name, "kind": string(in.Kind)}}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.waiting[in.From.ID]; ok {
		delete(p.waiting, in.From.ID)
		m.TaskID, m.ContextID = w.task, w.context
	} else if m.ContextID == "" {
		m.ContextID = p.ctxs[in.From.ID]
	}
	return m
}

// remember keeps the asker's A2A context, and the task when it asks them something.
func (p *peer) remember(asker, contextID string, t *Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctxs == nil {
		p.ctxs, p.waiting = map[string]string{}, map[string]pendingInput{}
	}
	if len(p.ctxs) >= maxAskers {
		clear(p.ctxs) // bounded: forgetting a context only starts a new conversation
	}
	if contextID != "" {
		p.ctxs[asker] = contextID
	}
	if t != nil && t.Status.State == StateInputRequired {
		if len(p.waiting) >= maxAskers {
			clear(p.waiting)
		}
		p.waiting[asker] = pendingInput{task: t.ID, context: t.ContextID}
	}
}

// send calls message/send, trying again after a transient failure.
func (p *peer) send(ctx context.Context, c *Caller, m Message) (Result, error) {
	delay := orDefault(p.b.RetryDelay, time.Second)
	for i := 1; ; i++ {
		res, err := c.Send(ctx, m)
		if err == nil {
			if res.Task == nil && res.Message == nil {
				return res, fmt.Errorf("message/send: an empty result")
			}
			return res, nil
		}
		if i == tries || !Transient(err) || ctx.Err() != nil {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// follow asks for task t until it settles (Settled) or end passes, at least once; then
// it cancels the task and returns it failed, saying why.
func (p *peer) follow(ctx context.Context, c *Caller, t *Task, end time.Time) *Task {
	every := orDefault(p.b.PollEvery, time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for first := true; first || p.b.now().Before(end); first = false {
		select {
		case <-ctx.Done():
			return t
		case <-tick.C:
		}
		got, err := c.GetTask(ctx, t.ID)
		if err != nil {
			if Transient(err) {
				continue
			}
			return &Task{ID: t.ID, ContextID: t.ContextID, Status: TaskStatus{State: StateFailed,
				Message: &Message{Parts: []Part{{Kind: "text", Text: "cotal lost track of the task: " + err.Error()}}}}}
		}
		if got.ID == "" {
			got.ID = t.ID
		}
		t = got
		if Settled(t.Status.State) {
			return t
		}
	}
	_ = c.CancelTask(ctx, t.ID)
	return &Task{ID: t.ID, ContextID: t.ContextID, Status: TaskStatus{State: StateFailed,
		Message: &Message{Parts: []Part{{Kind: "text", Text: fmt.Sprintf("no answer within %s; the task was cancelled", orDefault(p.b.TaskTimeout, 30*time.Minute))}}}}}
}

// answer DMs text to the asker, replying to in.
func (p *peer) answer(ctx context.Context, ep *client.Endpoint, asker protocol.Principal, in *client.Incoming, contextID, text string) {
	if in.ContextID != "" {
		contextID = in.ContextID
	}
	d := client.Draft{Parts: []protocol.Part{protocol.TextPart(bound(text))}, ReplyTo: in.ID, ContextID: contextID}
	if _, err := ep.DM(ctx, asker, d); err != nil && ctx.Err() == nil {
		p.log.Warn("answer not delivered", "to", asker.String(), "err", err)
	}
}

// parts are cotal parts as A2A parts: text as text, data as data (an object; any other
// JSON value is wrapped as {"value": ...}), and an artifact reference as a line of text.
func parts(ps []protocol.Part) []Part {
	var out []Part
	for _, x := range ps {
		switch x.Kind {
		case protocol.PartText:
			out = append(out, Part{Kind: "text", Text: x.Text})
		case protocol.PartData:
			d := x.Data
			if len(d) == 0 || d[0] != '{' {
				d, _ = json.Marshal(map[string]json.RawMessage{"value": x.Data})
			}
			out = append(out, Part{Kind: "data", Data: d})
		case protocol.PartArtifact:
			out = append(out, Part{Kind: "text", Text: fmt.Sprintf("[artifact %s, %s, %d bytes, %s]", x.Name, x.MediaType, x.Size, x.Digest)})
		}
	}
	if len(out) == 0 {
		out = []Part{{Kind: "text", Text: ""}}
	}
	return out
}

// text is A2A parts as one text: text as it is, data as its JSON, a file as a line
// naming it.
func text(ps []Part) string {
	var lines []string
	for _, x := range ps {
		switch x.Kind {
		case "text":
			lines = append(lines, x.Text)
		case "data":
			lines = append(lines, string(x.Data))
		case "file":
			if f := x.File; f != nil {
				where := f.URI
				if where == "" {
					where = fmt.Sprintf("%d bytes inline", len(f.Bytes)*3/4)
				}
				lines = append(lines, fmt.Sprintf("[file %s (%s): %s]", f.Name, f.MimeType, where))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// taskText is what a settled task says to its asker: its artifacts and status message
// when it completed; its question when it needs input; else its state and why.
func taskText(name string, t *Task) string {
	var b []string
	status := ""
	if t.Status.Message != nil {
		status = text(t.Status.Message.Parts)
	}
	switch t.Status.State {
	case StateCompleted:
		if status != "" {
			b = append(b, status)
		}
		for _, a := range t.Artifacts {
			if s := text(a.Parts); s != "" {
				b = append(b, s)
			}
		}
		if len(b) == 0 {
			b = append(b, "[a2a] "+name+" completed the task with no output")
		}
	case StateInputRequired:
		b = append(b, status, "[a2a] "+name+" needs more input: your next message to it answers this")
	default:
		b = append(b, fmt.Sprintf("[a2a] %s: task %s", name, t.Status.State))
		if status != "" {
			b = append(b, status)
		}
	}
	return strings.Join(b, "\n")
}

// bound cuts s to MaxAnswer bytes of valid UTF-8, saying so when it cut.
func bound(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxAnswer {
		return s
	}
	cut := MaxAnswer
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[a2a] answer cut at %d of %d bytes", cut, len(s))
}
