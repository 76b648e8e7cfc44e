package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdA2AAgent starts an A2A agent of the test's own on loopback for the rest of the
// script and sets $VAR to its base URL:
//
//	a2aagent echo VAR       an agent (card "Echo\x1b[31mAgent" 1.0, skills Echo and Shout)
//	                        whose message/send says back "echo: <text>"
//	a2aagent redirect VAR   its card URL redirects to a host off loopback
//	a2aagent huge VAR       its card is over 1 MiB
func cmdA2AAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: a2aagent echo|redirect|huge VAR")
	}
	var srv *httptest.Server
	mux := http.NewServeMux()
	switch args[0] {
	case "echo":
		mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"protocolVersion": "0.3.0", "name": "Echo\x1b[31mAgent", "version": "1.0",
				"description": "says back what it is told", "url": srv.URL + "/rpc", "preferredTransport": "JSONRPC",
				"capabilities": map[string]any{}, "defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
				"skills": []map[string]any{{"id": "echo", "name": "Echo", "description": "repeats", "tags": []string{}},
					{"id": "shout", "name": "Shout", "description": "repeats louder", "tags": []string{}}}})
		})
		mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID     any `json:"id"`
				Params struct {
					Message struct {
						MessageID string `json:"messageId"`
						Parts     []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"message"`
				} `json:"params"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			var text []string
			for _, p := range req.Params.Message.Parts {
				text = append(text, p.Text)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
				"kind": "message", "messageId": "re-" + req.Params.Message.MessageID, "role": "agent",
				"parts": []map[string]any{{"kind": "text", "text": "echo: " + strings.Join(text, " ")}}}})
		})
	case "redirect":
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://192.0.2.1/.well-known/agent-card.json", http.StatusFound)
		})
	case "huge":
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"name":"huge","url":"` + srv.URL + `/rpc","description":"` + strings.Repeat("x", 1<<20) + `"}`))
		})
	default:
		ts.Fatalf("usage: a2aagent echo|redirect|huge VAR")
	}
	srv = httptest.NewUnstartedServer(mux) // srv is set before a handler can read it
	srv.Start()
	ts.Defer(srv.Close)
	ts.Setenv(args[1], srv.URL)
}
