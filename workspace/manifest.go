package workspace

import (
	"fmt"

	"github.com/cotal-ai/cotal/trust"
)

// ManifestFile is the usual name of a team manifest.
const ManifestFile = "cotal.yaml"

// MaxManifestSize bounds a manifest (1 MiB).
const MaxManifestSize = 1 << 20

// Manifest API version and kind.
const (
	ManifestAPIVersion = "cotal/v1"
	ManifestKind       = "Mesh"
)

// Broker auth modes of a manifest.
const (
	AuthStatic = "static" // operator-mode JWTs, one credential per agent (the default)
	AuthOpen   = "open"   // no credentials (auth: false)
	AuthUser   = "user"   // per-user credentials
)

// How a manifest treats the ACLs in persona files (personaPermissions).
const (
	PersonaReject  = "reject"  // the manifest is the whole truth (the default)
	PersonaInclude = "include" // persona grants for channels the manifest does not declare are added
)

// Delivery classes of a channel.
const (
	DeliveryLive    = "live"
	DeliveryDurable = "durable"
)

// Manifest is a team manifest (cotal.yaml, apiVersion cotal/v1, kind Mesh): one space, its
// channels and which agents read and post on each. Channels and Agents are sorted by name.
type Manifest struct {
	Space              string
	Broker             ManifestBroker
	Limits             trust.Limits // what the space may store and each connection may do; 0 fields are unset
	Runtime            string       // manager runtime; "" means pty
	Agent              string       // default harness of agents that name none; "" for none
	PersonaPermissions string       // PersonaReject or PersonaInclude (default PersonaReject)
	Defaults           ChannelDefaults
	Agents             []ManifestAgent
	Channels           []ManifestChannel
	Path               string // the file it was read from
}

// ManifestBroker is the manifest's broker block.
type ManifestBroker struct {
	Servers []string // client URLs (nats:// or tls://, no credentials); nil means the default
	Host    string   // interface the broker binds; "" means the default
	Auth    string   // AuthStatic (also for auth: true and when unset), AuthOpen or AuthUser
}

// ChannelDefaults are the channel settings of the space that channels may override.
type ChannelDefaults struct {
	Replay        *bool  // replay history on join; nil means unset (the registry default)
	ReplayWindow  string // how far back a replay goes, such as 30s, 15m, 2h or 7d; "" unset
	DeliveryClass string // DeliveryLive or DeliveryDurable; "" unset
}

// ManifestAgent is one entry under agents: a persona file, inline settings, or both.
type ManifestAgent struct {
	Name               string // the principal's actor
	Persona            string // persona path as written, relative to the manifest's folder; "" inline
	Agent              string // harness; "" means the persona's, else the manifest's
	Cwd                string // working folder on the manager host, relative to its workspace
	Model              string
	Variant            string
	Role               string // overrides the persona's role
	Description        string
	Instructions       string         // system prompt (inline agents)
	Prompt             string         // kickoff turn
	Capabilities       []string       // spawn, run, role:<role>
	Continuity         string         // "none" (default) or "exact"
	PersonaPermissions string         // overrides the manifest's; "" means inherit
	LaunchOptions      map[string]any // raw harness options; nil for none
	Line               int            // line of its key in the manifest
}

// ManifestChannel is one entry under channels. Subscribe, AllowSubscribe and AllowPublish
// name agents.
type ManifestChannel struct {
	Name           string // concrete channel name
	Description    string
	Instructions   string
	Replay         *bool
	ReplayWindow   string
	DeliveryClass  string
	Subscribe      []string // agents that join it at boot
	AllowSubscribe []string // agents that may read it; empty means Subscribe
	AllowPublish   []string // agents that may post to it; empty means none
	Line           int      // line of its key in the manifest
}

// Readers returns the agents that may read the channel: AllowSubscribe, or Subscribe.
func (c *ManifestChannel) Readers() []string {
	if len(c.AllowSubscribe) > 0 {
		return c.AllowSubscribe
	}
	return c.Subscribe
}

// AgentAccess is what one agent's credential grants, least privilege: the channels it
// joins at boot, may read and may post to, each sorted and without repeats.
type AgentAccess struct {
	Role           string
	Subscribe      []string // boot joins; within AllowSubscribe
	AllowSubscribe []string // read ACL
	AllowPublish   []string // post ACL
}

// LoadManifest reads and parses the manifest at path.
func LoadManifest(path string) (*Manifest, error) {
	data, err := readLimited(path, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return ParseManifest(path, data)
}
