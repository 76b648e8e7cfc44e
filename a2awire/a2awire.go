// Package a2awire holds the A2A (Agent2Agent, v0.3) message and task shapes that both
// sides of cotal's A2A support speak: the inbound gateway (a2agw) and the bridge to
// outside agents (a2apeer). Only the fields cotal reads or writes are declared; unknown
// fields are ignored, as the protocol asks.
package a2awire

import "encoding/json"

// ProtocolVersion is the A2A protocol version cotal speaks and its cards declare.
const ProtocolVersion = "0.3.0"

// Task states (A2A TaskState).
const (
	StateSubmitted     = "submitted"
	StateWorking       = "working"
	StateInputRequired = "input-required"
	StateAuthRequired  = "auth-required"
	StateCompleted     = "completed"
	StateCanceled      = "canceled"
	StateFailed        = "failed"
	StateRejected      = "rejected"
	StateUnknown       = "unknown"
)

// Terminal reports whether a task in state s can change no more.
func Terminal(s string) bool {
	switch s {
	case StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

// Message is one turn of a conversation.
type Message struct {
	Kind      string         `json:"kind"` // "message"
	MessageID string         `json:"messageId"`
	Role      string         `json:"role"` // "user" or "agent"
	Parts     []Part         `json:"parts"`
	TaskID    string         `json:"taskId,omitempty"`
	ContextID string         `json:"contextId,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Part is one piece of a message or artifact: text, data or file.
type Part struct {
	Kind string          `json:"kind"` // "text", "data" or "file"
	Text string          `json:"text,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	File *FilePart       `json:"file,omitempty"`
}

// FilePart is a file by URI or inline bytes (base64).
type FilePart struct {
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	URI      string `json:"uri,omitempty"`
	Bytes    string `json:"bytes,omitempty"`
}

// Task is the unit of work of one conversation with an agent.
type Task struct {
	Kind      string     `json:"kind"` // "task"
	ID        string     `json:"id"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	History   []Message  `json:"history,omitempty"`
}

// TaskStatus is a task's state, with the agent message that set it.
type TaskStatus struct {
	State     string   `json:"state"`
	Message   *Message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []Part `json:"parts"`
}
