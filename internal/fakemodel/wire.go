package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// parse reduces a request body of api to a Request.
func parse(api string, body []byte) (Request, error) {
	var doc struct {
		Model        string            `json:"model"`
		Stream       bool              `json:"stream"`
		System       json.RawMessage   `json:"system"`
		Instructions string            `json:"instructions"`
		Messages     []json.RawMessage `json:"messages"`
		Input        json.RawMessage   `json:"input"`
		Tools        []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Request{}, fmt.Errorf("decode %s request: %w", api, err)
	}
	r := Request{API: api, Model: doc.Model, Stream: doc.Stream, Body: body}
	for _, t := range doc.Tools {
		r.addTools(t, "")
	}
	switch api {
	case Messages:
		r.System = text(doc.System)
		for _, m := range doc.Messages {
			addMessage(&r, m)
		}
	case Chat:
		for _, m := range doc.Messages {
			addMessage(&r, m)
		}
	case Responses:
		r.System = doc.Instructions
		var s string
		if json.Unmarshal(doc.Input, &s) == nil {
			r.UserTexts, r.LastIsToolResult = append(r.UserTexts, s), false
			break
		}
		var items []json.RawMessage
		if err := json.Unmarshal(doc.Input, &items); err != nil {
			return Request{}, fmt.Errorf("decode responses input: %w", err)
		}
		for _, it := range items {
			addItem(&r, it)
		}
	}
	return r, nil
}

// addTools adds the tools a definition offers: {name}, {function:{name}}, or the tools of
// a namespace ({type:"namespace", name, tools:[...]}), which the request lists as
// <namespace>__<tool> and a call names by its namespace and its own name.
func (r *Request) addTools(raw json.RawMessage, ns string) {
	var t struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return
	}
	if t.Type == "namespace" {
		for _, sub := range t.Tools {
			r.addTools(sub, t.Name)
		}
		return
	}
	name := t.Function.Name
	if name == "" {
		name = t.Name
	}
	if name == "" {
		return
	}
	if ns == "" {
		r.Tools = append(r.Tools, name)
		return
	}
	full := ns + "__" + name
	if r.namespaced == nil {
		r.namespaced = map[string][2]string{}
	}
	r.namespaced[full] = [2]string{ns, name}
	r.Tools = append(r.Tools, full)
}

// addMessage adds one Anthropic or Chat Completions message.
func addMessage(r *Request, raw json.RawMessage) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	switch m.Role {
	case "system", "developer":
		r.System += text(m.Content)
	case "tool": // Chat Completions: a tool's result
		r.ToolResults = append(r.ToolResults, text(m.Content))
		r.LastIsToolResult = true
	case "user":
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		tool := false
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" {
					r.ToolResults = append(r.ToolResults, text(b.Content))
					tool = true
				}
			}
		}
		if t := text(m.Content); t != "" {
			r.UserTexts = append(r.UserTexts, t)
		}
		r.LastIsToolResult = tool
	case "assistant":
		r.LastIsToolResult = false
	}
}

// addItem adds one Responses input item.
func addItem(r *Request, raw json.RawMessage) {
	var it struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &it) != nil {
		return
	}
	switch {
	case strings.HasSuffix(it.Type, "_call_output"):
		r.ToolResults = append(r.ToolResults, text(it.Output))
		r.LastIsToolResult = true
	case it.Role == "user" && (it.Type == "" || it.Type == "message"):
		r.UserTexts = append(r.UserTexts, text(it.Content))
		r.LastIsToolResult = false
	case it.Role == "system" || it.Role == "developer":
		r.System += text(it.Content)
	case it.Role == "assistant":
		r.LastIsToolResult = false
	}
}

// text is the text of a content value: a string, or the text parts of a list of blocks
// (Anthropic text and tool_result content, OpenAI input_text, output_text and text),
// joined by newlines.
func text(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text", "input_text", "output_text":
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// writeMessages answers on Anthropic's Messages wire, streamed or as one document.
func writeMessages(w http.ResponseWriter, req Request, rep Reply, n int) {
	id := fmt.Sprintf("msg_fake%d", n)
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	block := map[string]any{"type": "text", "text": rep.Text}
	stop := "end_turn"
	if rep.Tool != nil {
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%d", n), "name": rep.Tool.Name, "input": rep.Tool.Args}
		stop = "tool_use"
	}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if rep.Tool != nil {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": rep.Tool.Name, "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": argsJSON(rep.Tool)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": rep.Text}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// writeResponses answers on OpenAI's Responses wire (always streamed: Codex streams).
func writeResponses(w http.ResponseWriter, req Request, rep Reply, n int) {
	id := fmt.Sprintf("resp_fake%d", n)
	var item map[string]any
	if rep.Tool != nil {
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%d", n), "call_id": fmt.Sprintf("call_fake%d", n),
			"name": rep.Tool.Name, "arguments": argsJSON(rep.Tool), "status": "completed"}
		if nn, ok := req.namespaced[rep.Tool.Name]; ok {
			item["namespace"], item["name"] = nn[0], nn[1]
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}
	resp := map[string]any{"id": id, "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}
	if !req.Stream {
		resp["status"], resp["output"], resp["usage"] = "completed", []any{item}, usage
		writeJSON(w, resp)
		return
	}
	e := newSSE(w)
	e.event("response.created", map[string]any{"type": "response.created", "response": resp})
	e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if rep.Tool == nil {
		e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": rep.Text})
	}
	e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	done := map[string]any{"id": id, "object": "response", "status": "completed", "model": req.Model, "output": []any{item}, "usage": usage}
	e.event("response.completed", map[string]any{"type": "response.completed", "response": done})
}

// writeChat answers on OpenAI's Chat Completions wire, streamed or as one document.
func writeChat(w http.ResponseWriter, req Request, rep Reply, n int) {
	id := fmt.Sprintf("chatcmpl-fake%d", n)
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	finish := "stop"
	if rep.Tool != nil {
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": fmt.Sprintf("call_fake%d", n), "type": "function",
			"function": map[string]any{"name": rep.Tool.Name, "arguments": argsJSON(rep.Tool)}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": 0, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	e := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	e.event("", chunk(msg, nil))
	last := chunk(map[string]any{}, finish)
	last["usage"] = usage
	e.event("", last)
	e.raw("data: [DONE]")
}
