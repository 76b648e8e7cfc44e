// Package fakemodel is a scripted stand-in for the model APIs that coding-agent harnesses
// call, served over HTTP on loopback for tests: Anthropic's Messages API (what Claude Code
// calls, streamed as server-sent events or not), OpenAI's Responses API (what Codex calls)
// and OpenAI's Chat Completions (what OpenCode's OpenAI-compatible providers call).
//
// A test gives a Script: a function from the request a harness sent (the user turns it
// holds, the tools it offers, whether the last turn is a tool's result) to the reply, a
// text or one tool call. Every request is recorded, so a test can check what the harness
// sent the model: the stand-in is where "the model saw the prompt as the user's text" is
// observed.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// API names the wire a request came in on.
const (
	Messages  = "messages"  // Anthropic Messages: POST /v1/messages
	Responses = "responses" // OpenAI Responses: POST /v1/responses
	Chat      = "chat"      // OpenAI Chat Completions: POST /v1/chat/completions
)

// Request is what a harness asked the model, reduced to what a script decides on.
type Request struct {
	API    string
	Path   string
	Model  string
	Stream bool
	// System is the system prompt (Anthropic's system, OpenAI's instructions and system or
	// developer messages), joined.
	System string
	// UserTexts are the texts of every user turn in order; tool results are not among them.
	UserTexts []string
	// ToolResults are the outputs of every tool call the harness reports back, in order.
	ToolResults []string
	// LastIsToolResult is whether the conversation ends with a tool's result (the model is
	// asked to go on after its tool call) rather than a user's text.
	LastIsToolResult bool
	// Tools are the names of the tools the harness offers.
	Tools []string
	Body  []byte

	namespaced map[string][2]string // a namespaced tool's listed name: its namespace and name
}

// Tool returns the offered tool whose name is suffix or ends in "_"+suffix (harnesses
// prefix an MCP server's tools: mcp__cotal__cotal_dm, cotal_cotal_dm), and whether there is
// one.
func (r Request) Tool(suffix string) (string, bool) {
	for _, t := range r.Tools {
		if t == suffix || strings.HasSuffix(t, "_"+suffix) {
			return t, true
		}
	}
	return "", false
}

// LastUser is the text of the last user turn ("" when there is none).
func (r Request) LastUser() string {
	if len(r.UserTexts) == 0 {
		return ""
	}
	return r.UserTexts[len(r.UserTexts)-1]
}

// Saw reports whether a user turn of the request holds s.
func (r Request) Saw(s string) bool {
	for _, u := range r.UserTexts {
		if strings.Contains(u, s) {
			return true
		}
	}
	return false
}

// ToolCall is a reply that calls one tool with JSON arguments.
type ToolCall struct {
	Name string
	Args any
}

// Reply is the model's answer: Tool when set, else Text ("" answers "ok").
type Reply struct {
	Text string
	Tool *ToolCall
}

// Script decides the reply to one request. It runs on the server's goroutines.
type Script func(Request) Reply

// Server is a running stand-in. URL is its base (http://127.0.0.1:port); harnesses take
// it as ANTHROPIC_BASE_URL, or URL+"/v1" as an OpenAI base URL.
type Server struct {
	URL string

	script Script
	log    *slog.Logger
	srv    *http.Server
	ln     net.Listener

	mu   sync.Mutex
	reqs []Request
	seq  int
}

// Start serves script on a free loopback port until the test ends.
func Start(t testing.TB, script Script) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakemodel: listen: %v", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), script: script, ln: ln,
		log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Requests returns every request recorded so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Saw reports whether any recorded request had a user turn holding text.
func (s *Server) Saw(text string) bool {
	for _, r := range s.Requests() {
		if r.Saw(text) {
			return true
		}
	}
	return false
}

func (s *Server) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	var api string
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 1})
		return
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		api = Messages
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		api = Responses
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		api = Chat
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
		return
	default:
		s.log.Info("fakemodel: not served", "method", r.Method, "path", r.URL.Path)
		http.NotFound(w, r)
		return
	}
	req, err := parse(api, body)
	if err != nil {
		s.log.Info("fakemodel: bad request", "api", api, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Path = r.URL.Path
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	reply := s.script(req)
	if reply.Tool == nil && reply.Text == "" {
		reply.Text = "ok"
	}
	n := s.next()
	s.log.Info("fakemodel: reply", "api", api, "model", req.Model, "stream", req.Stream, "last_user", last(req.UserTexts),
		"tool_result", req.LastIsToolResult, "reply_text", reply.Text, "reply_tool", toolName(reply.Tool))
	switch api {
	case Messages:
		writeMessages(w, req, reply, n)
	case Responses:
		writeResponses(w, req, reply, n)
	case Chat:
		writeChat(w, req, reply, n)
	}
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	l := s[len(s)-1]
	if len(l) > 200 {
		l = l[:200] + "..."
	}
	return l
}

func toolName(t *ToolCall) string {
	if t == nil {
		return ""
	}
	return t.Name
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

// event writes one event; name "" writes a data-only event.
func (e sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode event: %v", err))
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (e sse) raw(line string) {
	fmt.Fprintf(e.w, "%s\n\n", line)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func argsJSON(t *ToolCall) string {
	b, err := json.Marshal(t.Args)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode tool arguments: %v", err))
	}
	return string(b)
}

// testWriter logs through t.Log, and stops once the test is over.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
