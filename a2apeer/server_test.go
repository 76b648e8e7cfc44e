package a2apeer_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cotal-ai/cotal/a2apeer"
)

// agent is an A2A agent of our own on loopback (JSON-RPC over HTTP, A2A v0.3), whose
// answers a test chooses. It records every message it was sent.
type agent struct {
	srv *httptest.Server

	mu       sync.Mutex
	received []a2apeer.Message // every message/send, in order
	tokens   []string          // the Authorization header of each call
	tasks    map[string]*a2apeer.Task
	gets     int
	// reply decides the answer to a message/send: a result, or an HTTP status to fail
	// with (result nil). nil echoes the text back as a message.
	reply func(a *agent, m a2apeer.Message) (any, int)
	// onGet, when set, may change a task as tasks/get reads it.
	onGet func(t *a2apeer.Task, gets int)
	// hold, when set, is waited on before message/send answers (holdCalls, release).
	hold     chan struct{}
	released bool
}

func newAgent(t *testing.T) *agent {
	a := &agent{tasks: map[string]*a2apeer.Task{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.card())
	})
	mux.HandleFunc("POST /rpc", a.rpc)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	t.Cleanup(a.release) // before Close: a held call must not keep the server open
	return a
}

// holdCalls makes message/send wait until release.
func (a *agent) holdCalls() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold, a.released = make(chan struct{}), false
}

// release lets held calls answer, and later ones answer at once.
func (a *agent) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hold != nil && !a.released {
		close(a.hold)
	}
	a.hold, a.released = nil, true
}

func (a *agent) card() map[string]any {
	return map[string]any{
		"protocolVersion": "0.3.0", "name": "Echo \x1b[31mAgent", "description": "Says back what it is told.\u202e",
		"url": a.srv.URL + "/rpc", "preferredTransport": "JSONRPC", "version": "1.2.3",
		"capabilities":      map[string]any{"streaming": false},
		"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []map[string]any{
			{"id": "echo", "name": "Echo", "description": "repeats the text", "tags": []string{"text"}},
			{"id": "shout", "name": "Shout", "description": "repeats it louder", "tags": []string{"text"}},
		},
	}
}

func (a *agent) rpc(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     any             `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.tokens = append(a.tokens, r.Header.Get("Authorization"))
	a.mu.Unlock()
	var result any
	status := http.StatusOK
	switch req.Method {
	case "message/send":
		var p a2apeer.SendParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			http.Error(w, "bad params", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.received = append(a.received, p.Message)
		hold := a.hold
		a.mu.Unlock()
		if hold != nil {
			<-hold
		}
		a.mu.Lock()
		if a.reply == nil {
			result = echo(p.Message)
		} else {
			result, status = a.reply(a, p.Message)
		}
		a.mu.Unlock()
	case "tasks/get", "tasks/cancel":
		var p struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Params, &p)
		a.mu.Lock()
		t := a.tasks[p.ID]
		if t != nil && req.Method == "tasks/get" {
			a.gets++
			if a.onGet != nil {
				a.onGet(t, a.gets)
			}
		}
		if t != nil && req.Method == "tasks/cancel" {
			t.Status.State = a2apeer.StateCanceled
		}
		if t != nil {
			c := *t
			result = &c
		}
		a.mu.Unlock()
		if t == nil {
			writeRPC(w, req.ID, nil, map[string]any{"code": -32001, "message": "Task not found"})
			return
		}
	default:
		writeRPC(w, req.ID, nil, map[string]any{"code": -32601, "message": "Method not found"})
		return
	}
	if status != http.StatusOK {
		http.Error(w, "down", status)
		return
	}
	writeRPC(w, req.ID, result, nil)
}

func writeRPC(w http.ResponseWriter, id, result, rpcErr any) {
	w.Header().Set("Content-Type", "application/json")
	out := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		out["error"] = rpcErr
	} else {
		out["result"] = result
	}
	_ = json.NewEncoder(w).Encode(out)
}

// echo answers m with a message saying its text back.
func echo(m a2apeer.Message) *a2apeer.Message {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Kind == "text" {
			b.WriteString(p.Text)
		}
	}
	ctx := m.ContextID
	if ctx == "" {
		ctx = "ctx-" + m.MessageID
	}
	return &a2apeer.Message{Kind: "message", MessageID: "re-" + m.MessageID, Role: "agent", ContextID: ctx,
		Parts: []a2apeer.Part{{Kind: "text", Text: "echo: " + b.String()}}}
}

// task makes a task for m in state, held by the agent for tasks/get. Call with a.mu held.
func (a *agent) task(m a2apeer.Message, state string) *a2apeer.Task {
	id := m.TaskID
	if id == "" {
		id = fmt.Sprintf("task-%d", len(a.tasks)+1)
	}
	ctx := m.ContextID
	if ctx == "" {
		ctx = "ctx-" + id
	}
	t := &a2apeer.Task{Kind: "task", ID: id, ContextID: ctx, Status: a2apeer.TaskStatus{State: state}}
	a.tasks[id] = t
	c := *t
	return &c
}

func (a *agent) messages() []a2apeer.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]a2apeer.Message(nil), a.received...)
}
