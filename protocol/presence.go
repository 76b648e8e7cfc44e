package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is the wire contract version this implementation advertises.
const ProtocolVersion = "0.4"

// Presence timing defaults.
const (
	HeartbeatInterval = 2 * time.Second // how often a live peer rewrites its record
	// AnycastAckWait is the ack wait of a role's anycast durable svc_<role>, the
	// reference's (streams.ts taskDurableConfig: 60 s, so its consumers.add finds the
	// same config): how long an ask taken by a holder that died waits before another
	// holder gets it. A live holder extends it while it works (InProgress).
	AnycastAckWait = 60 * time.Second
	// AnycastAckWaitGo0 is the ack wait earlier Go releases gave svc_<role>; provisioning
	// raises such a durable to AnycastAckWait in place.
	AnycastAckWaitGo0 = 30 * time.Second
	LivenessWindow    = 6 * time.Second // a record older than this means offline; also the KV TTL
)

// Status is what a peer says it is doing.
type Status string

// Presence statuses.
const (
	StatusIdle    Status = "idle"
	StatusWaiting Status = "waiting"
	StatusWorking Status = "working"
	StatusOffline Status = "offline"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusIdle, StatusWaiting, StatusWorking, StatusOffline:
		return true
	}
	return false
}

// Attention is an advisory hint on whether a peer wants to be woken.
type Attention string

// Attention values; absent means open.
const (
	AttentionOpen  Attention = "open"
	AttentionDND   Attention = "dnd"
	AttentionFocus Attention = "focus"
)

// Valid reports whether a is empty or one of the three attention values.
func (a Attention) Valid() bool {
	switch a {
	case "", AttentionOpen, AttentionDND, AttentionFocus:
		return true
	}
	return false
}

// Card kinds.
const (
	CardAgent    = "agent"
	CardEndpoint = "endpoint"
)

// Skill is one advertised skill of an AgentCard.
type Skill struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// AgentCard is the A2A-shaped self-description a peer publishes in presence.
type AgentCard struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	Kind            string         `json:"kind"`
	Role            string         `json:"role,omitempty"`
	Description     string         `json:"description,omitempty"`
	Tags            []string       `json:"tags,omitempty"`
	Skills          []Skill        `json:"skills,omitempty"`
	Meta            map[string]any `json:"meta,omitempty"`
	ProtocolVersion string         `json:"protocolVersion,omitempty"`
	Owner           string         `json:"owner,omitempty"`
	Actor           string         `json:"actor,omitempty"`
}

// Validate checks the card's id, name and kind.
func (c *AgentCard) Validate() error {
	if _, err := ParsePrincipal(c.ID); err != nil {
		return fmt.Errorf("card id: %w", err)
	}
	if err := CheckDisplayName(c.Name); err != nil {
		return fmt.Errorf("card %w", err)
	}
	if c.Kind != CardAgent && c.Kind != CardEndpoint {
		return fmt.Errorf("card kind %q: want %q or %q", c.Kind, CardAgent, CardEndpoint)
	}
	return nil
}

// Condition is a harness-relayed reason a peer is not making progress.
type Condition struct {
	Code    string `json:"code"`
	Source  string `json:"source,omitempty"`
	Message string `json:"message,omitempty"`
	Since   int64  `json:"since,omitempty"`
}

// Presence is the record a peer keeps under its own key in the presence bucket.
type Presence struct {
	Card          AgentCard         `json:"card"`
	Status        Status            `json:"status"`
	TS            int64             `json:"ts"`
	LifecycleUID  string            `json:"lifecycleUid,omitempty"`
	Condition     *Condition        `json:"condition,omitempty"`
	Environment   json.RawMessage   `json:"environment,omitempty"`
	Activity      string            `json:"activity,omitempty"`
	Attention     Attention         `json:"attention,omitempty"`
	ChannelModes  map[string]string `json:"channelModes,omitempty"`
	ActiveAt      int64             `json:"activeAt,omitempty"`
	StatusSince   int64             `json:"statusSince,omitempty"`
	ActivitySince int64             `json:"activitySince,omitempty"`
	// Channels are the channels (or patterns) the peer reads now: a Go extension a
	// reference peer ignores (docs/interop.md).
	Channels []string `json:"channels,omitempty"`
}

// Live reports whether the record is fresh at now and not offline.
func (p *Presence) Live(now time.Time) bool {
	return p.Status != StatusOffline && now.Sub(time.UnixMilli(p.TS)) <= LivenessWindow
}

// DecodePresence parses a presence record read under key and checks that the card id
// equals the key, so no peer can speak for another.
func DecodePresence(key string, data []byte) (Presence, error) {
	var p Presence
	if err := json.Unmarshal(data, &p); err != nil {
		return Presence{}, fmt.Errorf("presence %q: %w", key, err)
	}
	if p.Card.ID != key {
		return Presence{}, fmt.Errorf("presence %q: card id %q differs from its key", key, p.Card.ID)
	}
	if !p.Status.Valid() {
		return Presence{}, fmt.Errorf("presence %q: status %q is not idle, waiting, working or offline", key, p.Status)
	}
	if !p.Attention.Valid() {
		return Presence{}, fmt.Errorf("presence %q: attention %q is not open, dnd or focus", key, p.Attention)
	}
	if p.TS <= 0 {
		return Presence{}, errors.New("presence " + key + ": no ts")
	}
	return p, nil
}
