package a2agw

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// start creates the task a caller's message opens, or continues the caller's task
// (message.taskId), and sends the message on the mesh. It returns the task as stored
// after the send, and subscribes sub (when not nil) before anything is sent.
func (g *Gateway) start(ctx context.Context, t target, raw json.RawMessage, sub func(id string)) (*record, sendParams, error) {
	var p sendParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, p, err
	}
	m := p.Message
	if m == nil || m.MessageID == "" || m.Role != "user" {
		return nil, p, &rpcError{codeInvalidParams, `params.message: want a message with a messageId and role "user"`}
	}
	parts, err := toCotal(m.Parts)
	if err != nil {
		return nil, p, err
	}
	var push *PushConfig
	if p.Configuration != nil && p.Configuration.PushNotification != nil {
		if err := g.push.check(p.Configuration.PushNotification.URL); err != nil {
			return nil, p, &rpcError{codeInvalidParams, err.Error()}
		}
		push = p.Configuration.PushNotification
	}
	askID := client.NewID()
	if m.TaskID != "" {
		return g.follow(ctx, t, m, parts, askID, push, sub, p)
	}
	id := client.NewID()
	ctxID := m.ContextID
	if ctxID == "" {
		ctxID = client.NewID()
	}
	um := *m
	um.Kind, um.TaskID, um.ContextID = "message", id, ctxID
	r := &record{Task: Task{Kind: "task", ID: id, ContextID: ctxID, History: []Message{um},
		Status: TaskStatus{State: StateSubmitted, Timestamp: g.stamp()}},
		Target: t.name, Role: t.role, Asks: []string{askID}, Push: push, Updated: g.now().UnixMilli()}
	if t.role == "" {
		r.Peer = t.peer.Card.ID
	} else {
		r.BoardTask = g.openBoardTask(ctx, t.role, id, textOf(m.Parts))
	}
	if err := g.st.create(ctx, r); err != nil {
		return nil, p, err
	}
	if sub != nil {
		sub(id)
	}
	return g.sendAsk(ctx, r, client.Draft{ID: askID, Parts: parts, ContextID: askID}, p)
}

// follow sends a caller's follow-up on its task (one waiting for input, or still
// working): the message answers the agent's last reply.
func (g *Gateway) follow(ctx context.Context, t target, m *Message, parts []protocol.Part, askID string, push *PushConfig, sub func(string), p sendParams) (*record, sendParams, error) {
	var reason error
	um := *m
	r, _, err := g.st.update(ctx, m.TaskID, func(r *record) (bool, error) {
		if r.Target != t.name {
			reason = errNoTask // another endpoint's task: as if it did not exist
			return false, nil
		}
		if terminal(r.Task.Status.State) {
			reason = &rpcError{codeUnsupportedOp, fmt.Sprintf("task %s is %s: start a new task (send without taskId)", r.Task.ID, r.Task.Status.State)}
			return false, nil
		}
		um.Kind, um.ContextID = "message", r.Task.ContextID
		r.Task.History = appendHistory(r.Task.History, um)
		r.Asks = append(r.Asks, askID)
		if push != nil {
			r.Push = push
		}
		r.Updated = g.now().UnixMilli()
		return true, nil
	})
	if err == nil {
		err = reason
	}
	if err != nil {
		return nil, p, err
	}
	if err := g.st.index(ctx, askID, r.Task.ID); err != nil {
		return nil, p, err
	}
	if sub != nil {
		sub(r.Task.ID)
	}
	d := client.Draft{ID: askID, Parts: parts, ReplyTo: r.LastReply, ContextID: r.Asks[0]}
	return g.sendAsk(ctx, r, d, p)
}

// sendAsk sends d for task r (an ask to its role, a DM to its agent) and records the
// task working, or failed when the mesh refused the send.
func (g *Gateway) sendAsk(ctx context.Context, r *record, d client.Draft, p sendParams) (*record, sendParams, error) {
	var err error
	if r.Role != "" {
		_, err = g.cfg.Endpoint.Ask(ctx, r.Role, d)
	} else {
		var to protocol.Principal
		if to, err = protocol.ParsePrincipal(r.Peer); err == nil {
			_, err = g.cfg.Endpoint.DM(ctx, to, d)
		}
	}
	if g.afterSend != nil {
		g.afterSend(r.Task.ID)
	}
	state, text := StateWorking, ""
	if err != nil {
		state, text = StateFailed, "the mesh refused the message: "+err.Error()
	}
	return g.setState(ctx, r.Task.ID, state, text, r.LastReply, p)
}

// setState moves a non-terminal task to state, with text as the status message, unless
// a reply newer than lastReply (the task's last reply when the message went out) was
// recorded meanwhile: the agent may answer before the send returns, and its answer's
// state (input-required, completed) must not be overwritten by the send's "working".
func (g *Gateway) setState(ctx context.Context, id, state, text, lastReply string, p sendParams) (*record, sendParams, error) {
	r, changed, err := g.st.update(ctx, id, func(r *record) (bool, error) {
		if terminal(r.Task.Status.State) || r.Task.Status.State == state || r.LastReply != lastReply {
			return false, nil
		}
		r.Task.Status = TaskStatus{State: state, Timestamp: g.stamp()}
		if text != "" {
			r.Task.Status.Message = &Message{Kind: "message", MessageID: client.NewID(), Role: "agent",
				Parts: []Part{{Kind: "text", Text: text}}, TaskID: id, ContextID: r.Task.ContextID}
		}
		r.Updated = g.now().UnixMilli()
		return true, nil
	})
	if err != nil {
		return nil, p, err
	}
	if changed {
		g.publish(ctx, r, []any{g.statusEvent(r)})
	}
	return r, p, nil
}

// settled reports whether the caller has the turn: the task ended or waits for input.
func settled(state string) bool { return terminal(state) || state == StateInputRequired }

// messageSend opens or continues a task; unless configuration.blocking is false it
// waits (at most BlockFor) for the task to settle, then returns it.
func (g *Gateway) messageSend(ctx context.Context, t target, raw json.RawMessage) (any, error) {
	var events <-chan any
	var stop func()
	r, p, err := g.start(ctx, t, raw, func(id string) { events, stop = g.subscribe(id) })
	if stop != nil {
		defer stop()
	}
	if err != nil {
		return nil, err
	}
	blocking := p.Configuration == nil || p.Configuration.Blocking == nil || *p.Configuration.Blocking
	if blocking && !settled(r.Task.Status.State) {
		wait, cancel := context.WithTimeout(ctx, g.cfg.BlockFor)
		defer cancel()
	loop:
		for {
			select {
			case <-wait.Done():
				break loop
			case ev := <-events:
				if su, ok := ev.(StatusUpdate); ok && su.Final {
					break loop
				}
			}
		}
		if r, _, err = g.st.get(ctx, r.Task.ID); err != nil {
			return nil, err
		}
	}
	return trimmed(r.Task, historyLength(p)), nil
}

func historyLength(p sendParams) *int {
	if p.Configuration == nil {
		return nil
	}
	return p.Configuration.HistoryLength
}

// trimmed is t with at most n messages of history (all when n is nil).
func trimmed(t Task, n *int) Task {
	if n != nil && *n >= 0 && len(t.History) > *n {
		t.History = t.History[len(t.History)-*n:]
	}
	return t
}

// sse is one Server-Sent Events response of JSON-RPC responses.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
	id json.RawMessage
}

func openSSE(w http.ResponseWriter, id json.RawMessage) (*sse, bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, fl: fl, id: id}, true
}

func (s *sse) send(res any, rerr *rpcError) error {
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: s.id, Result: res, Error: rerr})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	s.fl.Flush()
	return nil
}

// messageStream opens or continues a task and streams it: the task first, then its
// status and artifact updates, until a final one (the task settled) or the caller goes.
func (g *Gateway) messageStream(w http.ResponseWriter, r *http.Request, t target, req rpcRequest) {
	var events <-chan any
	var stop func()
	rec, _, err := g.start(r.Context(), t, req.Params, func(id string) { events, stop = g.subscribe(id) })
	if stop != nil {
		defer stop()
	}
	if err != nil {
		g.reply(w, req.ID, nil, err)
		return
	}
	g.stream(w, r, req.ID, rec, events)
}

// stream writes task rec, then its events until a final one.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request, id json.RawMessage, rec *record, events <-chan any) {
	s, ok := openSSE(w, id)
	if !ok {
		g.reply(w, id, nil, &rpcError{codeInternal, "this connection cannot stream"})
		return
	}
	if err := s.send(rec.Task, nil); err != nil || settled(rec.Task.Status.State) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-events:
			if err := s.send(ev, nil); err != nil {
				return
			}
			if su, ok := ev.(StatusUpdate); ok && su.Final {
				return
			}
		}
	}
}

// task reads a task of t named by params, or errNoTask (another endpoint's task too).
func (g *Gateway) task(ctx context.Context, t target, raw json.RawMessage) (*record, idParams, error) {
	var p idParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, p, err
	}
	if p.ID == "" {
		return nil, p, &rpcError{codeInvalidParams, "params.id: the task id is required"}
	}
	r, _, err := g.st.get(ctx, p.ID)
	if err == nil && r.Target != t.name {
		err = errNoTask
	}
	return r, p, err
}

func (g *Gateway) tasksGet(ctx context.Context, t target, raw json.RawMessage) (any, error) {
	r, p, err := g.task(ctx, t, raw)
	if err != nil {
		return nil, err
	}
	return trimmed(r.Task, p.HistoryLength), nil
}

// tasksCancel cancels a task that has not ended, and tells the agent that served it.
func (g *Gateway) tasksCancel(ctx context.Context, t target, raw json.RawMessage) (any, error) {
	r, _, err := g.task(ctx, t, raw)
	if err != nil {
		return nil, err
	}
	var reason error
	r, changed, err := g.st.update(ctx, r.Task.ID, func(r *record) (bool, error) {
		if terminal(r.Task.Status.State) {
			reason = &rpcError{codeTaskNotCancel, fmt.Sprintf("task %s is %s and cannot be canceled", r.Task.ID, r.Task.Status.State)}
			return false, nil
		}
		r.Task.Status = TaskStatus{State: StateCanceled, Timestamp: g.stamp()}
		r.Updated = g.now().UnixMilli()
		return true, nil
	})
	if err == nil {
		err = reason
	}
	if err != nil {
		return nil, err
	}
	if changed {
		g.publish(ctx, r, []any{g.statusEvent(r)})
		g.tellCanceled(ctx, r)
	}
	return r.Task, nil
}

// tellCanceled DMs the agent serving r (the target agent, or the role holder that
// answered) that the caller canceled the task, as a reply to the task's last message.
func (g *Gateway) tellCanceled(ctx context.Context, r *record) {
	who := r.Peer
	if who == "" {
		who = r.Replier
	}
	to, err := protocol.ParsePrincipal(who)
	if err != nil {
		return // an ask nobody answered yet: its holder finds the task canceled when it replies
	}
	raw, _ := json.Marshal(map[string]string{"kind": StatePartKind, "state": StateCanceled})
	d := client.Draft{Parts: []protocol.Part{protocol.TextPart("The A2A caller canceled this task; stop working on it."),
		{Kind: StatePartKind, Raw: raw}}, ReplyTo: r.Asks[len(r.Asks)-1], ContextID: r.Asks[0]}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := g.cfg.Endpoint.DM(sctx, to, d); err != nil {
		g.log.Warn("a2a gateway: could not tell the agent its task was canceled", "task", r.Task.ID, "to", who, "err", err)
	}
}

// resubscribe streams a task from its current state on.
func (g *Gateway) resubscribe(w http.ResponseWriter, r *http.Request, t target, req rpcRequest) {
	rec, _, err := g.task(r.Context(), t, req.Params)
	if err != nil {
		g.reply(w, req.ID, nil, err)
		return
	}
	events, stop := g.subscribe(rec.Task.ID)
	defer stop()
	// Read again after subscribing: a change between the two reads is in events.
	if rec, _, err = g.st.get(r.Context(), rec.Task.ID); err != nil {
		g.reply(w, req.ID, nil, err)
		return
	}
	g.stream(w, r, req.ID, rec, events)
}

// pushSet sets a task's push notification config.
func (g *Gateway) pushSet(ctx context.Context, t target, raw json.RawMessage) (any, error) {
	var p TaskPushConfig
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if err := g.push.check(p.PushConfig.URL); err != nil {
		return nil, &rpcError{codeInvalidParams, err.Error()}
	}
	ids, _ := json.Marshal(idParams{ID: p.TaskID})
	if _, _, err := g.task(ctx, t, ids); err != nil {
		return nil, err
	}
	cfg := p.PushConfig
	if cfg.ID == "" {
		cfg.ID = p.TaskID
	}
	_, _, err := g.st.update(ctx, p.TaskID, func(r *record) (bool, error) {
		r.Push = &cfg
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return TaskPushConfig{TaskID: p.TaskID, PushConfig: cfg}, nil
}

// pushGet returns a task's push notification config.
func (g *Gateway) pushGet(ctx context.Context, t target, raw json.RawMessage) (any, error) {
	r, _, err := g.task(ctx, t, raw)
	if err != nil {
		return nil, err
	}
	if r.Push == nil {
		return nil, &rpcError{codeInvalidParams, "task " + r.Task.ID + " has no push notification config"}
	}
	return TaskPushConfig{TaskID: r.Task.ID, PushConfig: *r.Push}, nil
}

// textOf joins the text parts of a caller's message.
func textOf(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
