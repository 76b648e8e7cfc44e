package a2agw

import "encoding/json"

// The A2A v0.3 wire shapes the gateway speaks (JSON-RPC 2.0 binding). Only the fields
// the gateway reads or writes are declared; a request's unknown fields are ignored, as
// the protocol asks.

// ProtocolVersion is the A2A protocol version the gateway's cards declare.
const ProtocolVersion = "0.3.0"

// Task states (A2A TaskState).
const (
	StateSubmitted     = "submitted"
	StateWorking       = "working"
	StateInputRequired = "input-required"
	StateCompleted     = "completed"
	StateCanceled      = "canceled"
	StateFailed        = "failed"
)

// terminal reports whether a task in state s can change no more.
func terminal(s string) bool {
	return s == StateCompleted || s == StateCanceled || s == StateFailed
}

// JSON-RPC and A2A error codes.
const (
	codeParse            = -32700
	codeInvalidRequest   = -32600
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternal         = -32603
	codeTaskNotFound     = -32001
	codeTaskNotCancel    = -32002
	codeUnsupportedOp    = -32004
	codeContentNotSupp   = -32005
	codePushNotSupported = -32003
)

// AgentCard is an A2A Agent Card.
type AgentCard struct {
	ProtocolVersion    string                    `json:"protocolVersion"`
	Name               string                    `json:"name"`
	Description        string                    `json:"description"`
	URL                string                    `json:"url"`
	PreferredTransport string                    `json:"preferredTransport"`
	Version            string                    `json:"version"`
	Capabilities       Capabilities              `json:"capabilities"`
	DefaultInputModes  []string                  `json:"defaultInputModes"`
	DefaultOutputModes []string                  `json:"defaultOutputModes"`
	Skills             []Skill                   `json:"skills"`
	SecuritySchemes    map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	Security           []map[string][]string     `json:"security,omitempty"`
}

// Capabilities are the optional features a card declares.
type Capabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// Skill is one thing an agent can do.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// SecurityScheme is an HTTP authentication scheme (the gateway declares bearer only).
type SecurityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme"`
	Description string `json:"description,omitempty"`
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
	Kind string          `json:"kind"`
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

// Task is the unit of work the gateway tracks for one conversation with an agent.
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

// StatusUpdate is the status-update event of a stream.
type StatusUpdate struct {
	Kind      string     `json:"kind"` // "status-update"
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
	Final     bool       `json:"final"`
}

// ArtifactUpdate is the artifact-update event of a stream.
type ArtifactUpdate struct {
	Kind      string   `json:"kind"` // "artifact-update"
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	LastChunk bool     `json:"lastChunk"`
}

// PushConfig is where the gateway POSTs a task when it changes.
type PushConfig struct {
	ID    string `json:"id,omitempty"`
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
}

// TaskPushConfig pairs a push config with its task.
type TaskPushConfig struct {
	TaskID     string     `json:"taskId"`
	PushConfig PushConfig `json:"pushNotificationConfig"`
}

// sendParams are the params of message/send and message/stream.
type sendParams struct {
	Message       *Message `json:"message"`
	Configuration *struct {
		Blocking         *bool       `json:"blocking"`
		HistoryLength    *int        `json:"historyLength"`
		PushNotification *PushConfig `json:"pushNotificationConfig"`
	} `json:"configuration"`
}

// idParams are the params of tasks/get, tasks/cancel, tasks/resubscribe and
// tasks/pushNotificationConfig/get.
type idParams struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength"`
}

// rpcRequest is a JSON-RPC 2.0 request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcError is a JSON-RPC 2.0 error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

// rpcResponse is a JSON-RPC 2.0 response (one SSE event of a stream, too).
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}
