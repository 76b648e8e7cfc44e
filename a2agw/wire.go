package a2agw

import (
	"encoding/json"

	"github.com/cotal-ai/cotal/a2awire"
)

// The A2A v0.3 wire shapes the gateway speaks (JSON-RPC 2.0 binding). Only the fields
// the gateway reads or writes are declared; a request's unknown fields are ignored, as
// the protocol asks.

// ProtocolVersion is the A2A protocol version the gateway's cards declare.
const ProtocolVersion = a2awire.ProtocolVersion

// Task states the gateway sets (a2awire's).
const (
	StateSubmitted     = a2awire.StateSubmitted
	StateWorking       = a2awire.StateWorking
	StateInputRequired = a2awire.StateInputRequired
	StateCompleted     = a2awire.StateCompleted
	StateCanceled      = a2awire.StateCanceled
	StateFailed        = a2awire.StateFailed
)

// terminal reports whether a task in state s can change no more.
func terminal(s string) bool { return a2awire.Terminal(s) }

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

// The message and task shapes are a2awire's, shared with the outbound bridge (a2apeer).
type (
	// Message is one turn of a conversation.
	Message = a2awire.Message
	// Part is one piece of a message or artifact.
	Part = a2awire.Part
	// FilePart is a file by URI or inline bytes.
	FilePart = a2awire.FilePart
	// Task is the unit of work the gateway tracks for one conversation with an agent.
	Task = a2awire.Task
	// TaskStatus is a task's state, with the agent message that set it.
	TaskStatus = a2awire.TaskStatus
	// Artifact is an output of a task.
	Artifact = a2awire.Artifact
)

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
