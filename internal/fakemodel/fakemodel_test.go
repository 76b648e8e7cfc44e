package fakemodel

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// TestWires: each API's request is read into the same Request, and the script's tool call
// comes back in that API's shape, streamed.
func TestWires(t *testing.T) {
	s := Start(t, func(r Request) Reply {
		if tool, ok := r.Tool("cotal_dm"); ok && !r.LastIsToolResult {
			return Reply{Tool: &ToolCall{Name: tool, Args: map[string]string{"to": "bob"}}}
		}
		return Reply{}
	})
	for _, c := range []struct {
		path, body string
		want       []string // in the streamed answer
	}{
		{"/v1/messages", `{"model":"m","stream":true,"system":[{"type":"text","text":"sys"}],
			"tools":[{"name":"mcp__cotal__cotal_dm"}],
			"messages":[{"role":"user","content":[{"type":"text","text":"-p hi"}]}]}`,
			[]string{"event: message_start", `"type":"tool_use"`, `"name":"mcp__cotal__cotal_dm"`, `"partial_json":"{\"to\":\"bob\"}"`, `"stop_reason":"tool_use"`}},
		{"/v1/responses", `{"model":"m","stream":true,"instructions":"sys",
			"tools":[{"type":"namespace","name":"mcp__cotal","tools":[{"type":"function","name":"cotal_dm"}]}],
			"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"-p hi"}]}]}`,
			[]string{"event: response.completed", `"type":"function_call"`, `"namespace":"mcp__cotal"`, `"name":"cotal_dm"`}},
		{"/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"cotal_cotal_dm"}}],
			"messages":[{"role":"system","content":"sys"},{"role":"user","content":"-p hi"}]}`,
			[]string{`"tool_calls"`, `"name":"cotal_cotal_dm"`, `"finish_reason":"tool_calls"`, "data: [DONE]"}},
	} {
		out := post(t, s.URL+c.path, c.body)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: answer lacks %s:\n%s", c.path, w, out)
			}
		}
		rs := s.Requests()
		r := rs[len(rs)-1]
		if r.LastUser() != "-p hi" || r.System != "sys" || r.LastIsToolResult || !s.Saw("-p hi") {
			t.Errorf("%s: read %+v", c.path, r)
		}
	}
	// A tool's result ends the conversation: the script is told so, and the answer is text.
	out := post(t, s.URL+"/v1/messages", `{"model":"m","tools":[{"name":"cotal_dm"}],"messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"cotal_dm","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sent to bob"}]}]}]}`)
	rs := s.Requests()
	if r := rs[len(rs)-1]; !r.LastIsToolResult || len(r.ToolResults) != 1 || r.ToolResults[0] != "sent to bob" {
		t.Errorf("tool result read as %+v", r)
	}
	if !strings.Contains(out, `"text":"ok"`) || !strings.Contains(out, `"stop_reason":"end_turn"`) {
		t.Errorf("non-streamed answer %s", out)
	}
}
