package workspace

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/protocol"
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
	Runtime            string // manager runtime; "" means pty
	Agent              string // default harness of agents that name none; "" for none
	PersonaPermissions string // PersonaReject or PersonaInclude (default PersonaReject)
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

// The keys each manifest mapping knows.
func topKeys() []string {
	return []string{"apiVersion", "kind", "space", "broker", "runtime", "agent", "personaPermissions", "defaults", "agents", "channels"}
}

func brokerKeys() []string { return []string{"servers", "host", "auth"} }

func defaultKeys() []string { return []string{"replay", "replayWindow", "deliveryClass"} }

func agentKeys() []string {
	return []string{"persona", "agent", "cwd", "model", "variant", "role", "description", "instructions", "prompt",
		"capabilities", "continuity", "personaPermissions", "launchOptions"}
}

func channelKeys() []string {
	return []string{"description", "instructions", "replay", "replayWindow", "deliveryClass", "subscribe", "allowSubscribe", "allowPublish"}
}

// validReplayWindow accepts the replay window grammar of the channel registry, ^[0-9]+[smhd]$.
func validReplayWindow(s string) bool {
	if len(s) < 2 || !strings.ContainsRune("smhd", rune(s[len(s)-1])) {
		return false
	}
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// LoadManifest reads and parses the manifest at path.
func LoadManifest(path string) (*Manifest, error) {
	data, err := readLimited(path, MaxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return ParseManifest(path, data)
}

// ParseManifest parses a team manifest. Unknown keys, values of the wrong shape, channels
// naming undeclared agents, wildcard channel names, a subscriber outside allowSubscribe
// and names that are not actor tokens are refused with a *ParseError naming path and line.
func ParseManifest(path string, data []byte) (*Manifest, error) {
	y := &yamlFile{path: path}
	if len(data) > MaxManifestSize {
		return nil, y.errLine(1, "%d bytes is over the %d-byte limit of a manifest", len(data), MaxManifestSize)
	}
	root, err := y.document(data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, y.errLine(1, "empty manifest: start with apiVersion: %s, kind: %s, space: <name>", ManifestAPIVersion, ManifestKind)
	}
	top, err := y.known(root, "", topKeys())
	if err != nil {
		return nil, err
	}
	m := &Manifest{Path: path, PersonaPermissions: PersonaReject, Broker: ManifestBroker{Auth: AuthStatic}}
	for _, k := range []string{"apiVersion", "kind", "space", "channels"} {
		if top[k] == nil {
			return nil, y.errLine(1, "%s is required", k)
		}
	}
	for _, f := range []struct{ key, want string }{{"apiVersion", ManifestAPIVersion}, {"kind", ManifestKind}} {
		v, err := y.str(top[f.key].value, f.key)
		if err != nil {
			return nil, err
		}
		if v != f.want {
			return nil, y.errAt(top[f.key].value, "%s %q: want %s", f.key, v, f.want)
		}
	}
	if m.Space, err = y.str(top["space"].value, "space"); err != nil {
		return nil, err
	}
	if err := protocol.CheckSpace(m.Space); err != nil {
		return nil, y.errAt(top["space"].value, "space: %w", err)
	}
	if kv := top["broker"]; kv != nil {
		if m.Broker, err = y.broker(kv.value); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"runtime", &m.Runtime}, {"agent", &m.Agent}} {
		if kv := top[f.key]; kv != nil {
			if *f.dst, err = y.token(kv.value, f.key); err != nil {
				return nil, err
			}
		}
	}
	if kv := top["personaPermissions"]; kv != nil {
		if m.PersonaPermissions, err = y.personaPermissions(kv.value); err != nil {
			return nil, err
		}
		if m.PersonaPermissions == "" {
			m.PersonaPermissions = PersonaReject
		}
	}
	if kv := top["defaults"]; kv != nil {
		fields, err := y.known(kv.value, "defaults", defaultKeys())
		if err != nil {
			return nil, err
		}
		if m.Defaults, err = y.channelDefaults(fields, "defaults"); err != nil {
			return nil, err
		}
	}
	declared := map[string]bool{}
	if kv := top["agents"]; kv != nil && !isNull(kv.value) {
		pairs, err := y.mapping(kv.value, "agents")
		if err != nil {
			return nil, err
		}
		for _, p := range pairs {
			a, err := y.agent(p)
			if err != nil {
				return nil, err
			}
			declared[a.Name] = true
			m.Agents = append(m.Agents, a)
		}
	}
	if v := top["channels"].value; !isNull(v) {
		pairs, err := y.mapping(v, "channels")
		if err != nil {
			return nil, err
		}
		for _, p := range pairs {
			c, err := y.channel(p, declared)
			if err != nil {
				return nil, err
			}
			m.Channels = append(m.Channels, c)
		}
	}
	sort.Slice(m.Agents, func(i, j int) bool { return m.Agents[i].Name < m.Agents[j].Name })
	sort.Slice(m.Channels, func(i, j int) bool { return m.Channels[i].Name < m.Channels[j].Name })
	return m, nil
}

// known reads a mapping whose keys must all be in keys; an unknown key is refused at its
// line with the key it may be a typo of, or the keys known there. what names the mapping
// ("" for the top level).
func (y *yamlFile) known(n *yaml.Node, what string, keys []string) (map[string]*keyValue, error) {
	where := "in " + what
	if what == "" {
		what, where = "manifest", "at the top level"
	}
	pairs, err := y.mapping(n, what)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*keyValue, len(pairs))
	for i := range pairs {
		kv := &pairs[i]
		if !contains(keys, kv.key) {
			hint := "known keys: " + strings.Join(keys, ", ")
			if near := typoOf(kv.key, keys); near != "" {
				hint = "did you mean " + near + "?"
			}
			return nil, y.errAt(kv.keyNode, "unknown key %q %s (%s)", kv.key, where, hint)
		}
		out[kv.key] = kv
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// token reads a string that must be a protocol token (harness, runtime names); null is "".
func (y *yamlFile) token(n *yaml.Node, key string) (string, error) {
	v, err := y.str(n, key)
	if err != nil {
		return "", err
	}
	if v != "" && !protocol.ValidToken(v) {
		return "", y.errAt(n, "%s %q: use letters, digits, _ and - only", key, v)
	}
	return v, nil
}

// oneOf reads a string that must be one of want; null is "".
func (y *yamlFile) oneOf(n *yaml.Node, key string, want ...string) (string, error) {
	v, err := y.str(n, key)
	if err != nil {
		return "", err
	}
	if v != "" && !contains(want, v) {
		return "", y.errAt(n, "%s %q: want %s", key, v, strings.Join(want, " or "))
	}
	return v, nil
}

func (y *yamlFile) personaPermissions(n *yaml.Node) (string, error) {
	return y.oneOf(n, "personaPermissions", PersonaReject, PersonaInclude)
}

// broker reads the broker block.
func (y *yamlFile) broker(n *yaml.Node) (ManifestBroker, error) {
	b := ManifestBroker{Auth: AuthStatic}
	if isNull(n) {
		return b, nil
	}
	fields, err := y.known(n, "broker", brokerKeys())
	if err != nil {
		return b, err
	}
	if kv := fields["servers"]; kv != nil {
		v := resolve(kv.value)
		var list []string
		if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			for _, s := range strings.Split(v.Value, ",") {
				list = append(list, strings.TrimSpace(s))
			}
		} else if list, err = y.strs(v, "broker.servers"); err != nil {
			return b, err
		}
		for _, s := range list {
			if err := checkServerURL(s); err != nil {
				return b, y.errAt(v, "broker.servers: %w", err)
			}
		}
		b.Servers = list
	}
	if kv := fields["host"]; kv != nil {
		if b.Host, err = y.str(kv.value, "broker.host"); err != nil {
			return b, err
		}
		if b.Host != "" && net.ParseIP(b.Host) == nil && !validHostname(b.Host) {
			return b, y.errAt(kv.value, "broker.host %q: want an interface address such as 127.0.0.1 or 0.0.0.0 (no port)", b.Host)
		}
	}
	if kv := fields["auth"]; kv != nil {
		v := resolve(kv.value)
		switch {
		case isNull(v):
		case v.Kind == yaml.ScalarNode && v.Tag == "!!bool":
			on, err := y.boolean(v, "broker.auth")
			if err != nil {
				return b, err
			}
			if !*on {
				b.Auth = AuthOpen
			}
		default:
			if b.Auth, err = y.oneOf(v, "broker.auth", AuthStatic, AuthUser); err != nil {
				return b, fmt.Errorf("%w (or true, or false for an open mesh)", err)
			}
			if b.Auth == "" {
				b.Auth = AuthStatic
			}
		}
	}
	return b, nil
}

// checkServerURL accepts nats://host:port or tls://host:port without credentials.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a nats://host:port URL", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q holds credentials: a manifest never does; agents get theirs when they start", u.Redacted())
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %s is not 0 to 65535", s, u.Port())
	}
	return nil
}

// validHostname accepts letters, digits, - and . (a DNS name).
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if c != '-' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// channelDefaults reads replay, replayWindow and deliveryClass of a map already checked
// for unknown keys; where prefixes the keys in messages.
func (y *yamlFile) channelDefaults(fields map[string]*keyValue, where string) (ChannelDefaults, error) {
	var d ChannelDefaults
	var err error
	if kv := fields["replay"]; kv != nil {
		if d.Replay, err = y.boolean(kv.value, where+".replay"); err != nil {
			return d, err
		}
	}
	if kv := fields["replayWindow"]; kv != nil {
		if d.ReplayWindow, err = y.str(kv.value, where+".replayWindow"); err != nil {
			return d, err
		}
		if d.ReplayWindow != "" && !validReplayWindow(d.ReplayWindow) {
			return d, y.errAt(kv.value, "%s.replayWindow %q: want a number and s, m, h or d, such as 15m or 7d", where, d.ReplayWindow)
		}
	}
	if kv := fields["deliveryClass"]; kv != nil {
		if d.DeliveryClass, err = y.oneOf(kv.value, where+".deliveryClass", DeliveryLive, DeliveryDurable); err != nil {
			return d, err
		}
	}
	return d, nil
}

// agent reads one entry under agents: a bare persona path or a map of settings.
func (y *yamlFile) agent(kv keyValue) (ManifestAgent, error) {
	a := ManifestAgent{Name: kv.key, Line: kv.keyNode.Line + y.offset}
	if !protocol.ValidActor(a.Name) {
		return a, y.errAt(kv.keyNode, "agent %q: use 1 to %d letters, digits or _ (it becomes the agent's actor)", a.Name, protocol.MaxActorLength)
	}
	where := "agents." + a.Name
	v := resolve(kv.value)
	if v.Kind == yaml.ScalarNode {
		if v.Tag == "!!null" || v.Value == "" {
			return a, y.errAt(v, "%s: want a persona path (./agents/%s.md) or a map of settings", where, a.Name)
		}
		a.Persona = v.Value
		return a, nil
	}
	fields, err := y.known(v, where, agentKeys())
	if err != nil {
		return a, err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"persona", &a.Persona}, {"cwd", &a.Cwd}, {"model", &a.Model}, {"variant", &a.Variant},
		{"description", &a.Description}, {"instructions", &a.Instructions}, {"prompt", &a.Prompt}} {
		if kv := fields[f.key]; kv != nil {
			if *f.dst, err = y.str(kv.value, where+"."+f.key); err != nil {
				return a, err
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"agent", &a.Agent}, {"role", &a.Role}} {
		if kv := fields[f.key]; kv != nil {
			if *f.dst, err = y.token(kv.value, where+"."+f.key); err != nil {
				return a, err
			}
		}
	}
	if kv := fields["cwd"]; kv != nil && a.Cwd != "" && !filepath.IsLocal(filepath.FromSlash(a.Cwd)) {
		return a, y.errAt(kv.value, "%s.cwd %q: want a folder inside the manager's workspace (relative, no ..)", where, a.Cwd)
	}
	if kv := fields["continuity"]; kv != nil {
		if a.Continuity, err = y.oneOf(kv.value, where+".continuity", "none", "exact"); err != nil {
			return a, err
		}
	}
	if kv := fields["personaPermissions"]; kv != nil {
		if a.PersonaPermissions, err = y.oneOf(kv.value, where+".personaPermissions", PersonaReject, PersonaInclude); err != nil {
			return a, err
		}
	}
	if kv := fields["capabilities"]; kv != nil {
		if a.Capabilities, err = y.strs(kv.value, where+".capabilities"); err != nil {
			return a, err
		}
		seq := resolve(kv.value)
		for i, c := range a.Capabilities {
			if err := checkCapability(c); err != nil {
				return a, y.errAt(resolve(seq.Content[i]), "%s.capabilities: %w", where, err)
			}
		}
	}
	if kv := fields["launchOptions"]; kv != nil && !isNull(kv.value) {
		if resolve(kv.value).Kind != yaml.MappingNode {
			return a, y.errAt(kv.value, "%s.launchOptions: want a map of options, not %s", where, kindName(resolve(kv.value)))
		}
		opts, err := y.anyValue(kv.value, where+".launchOptions")
		if err != nil {
			return a, err
		}
		a.LaunchOptions, _ = opts.(map[string]any)
	}
	if a.Persona == "" && a.Model == "" && a.Instructions == "" {
		return a, y.errAt(kv.keyNode, "%s: an agent without a persona needs model or instructions", where)
	}
	return a, nil
}

// channel reads one entry under channels; declared are the agents of the manifest.
func (y *yamlFile) channel(kv keyValue, declared map[string]bool) (ManifestChannel, error) {
	c := ManifestChannel{Name: kv.key, Line: kv.keyNode.Line + y.offset}
	if err := protocol.CheckChannelPattern(c.Name); err != nil {
		return c, y.errAt(kv.keyNode, "channels: %w", err)
	}
	if err := protocol.CheckConcreteChannel(c.Name); err != nil {
		return c, y.errAt(kv.keyNode, "channels: %w %q: a manifest declares concrete channels, without * or > (wildcard grants belong in persona files)", protocol.ErrInvalidChannel, c.Name)
	}
	if isNull(kv.value) {
		return c, nil
	}
	where := "channels." + c.Name
	fields, err := y.known(kv.value, where, channelKeys())
	if err != nil {
		return c, err
	}
	d, err := y.channelDefaults(fields, where)
	if err != nil {
		return c, err
	}
	c.Replay, c.ReplayWindow, c.DeliveryClass = d.Replay, d.ReplayWindow, d.DeliveryClass
	for _, f := range []struct {
		key string
		dst *string
	}{{"description", &c.Description}, {"instructions", &c.Instructions}} {
		if kv := fields[f.key]; kv != nil {
			if *f.dst, err = y.str(kv.value, where+"."+f.key); err != nil {
				return c, err
			}
		}
	}
	lists := []struct {
		key string
		dst *[]string
	}{{"subscribe", &c.Subscribe}, {"allowSubscribe", &c.AllowSubscribe}, {"allowPublish", &c.AllowPublish}}
	for _, f := range lists {
		kv := fields[f.key]
		if kv == nil {
			continue
		}
		names, err := y.strs(kv.value, where+"."+f.key)
		if err != nil {
			return c, err
		}
		for i, name := range names {
			at := resolve(resolve(kv.value).Content[i])
			if !declared[name] {
				return c, y.errAt(at, "%s.%s: agent %q is not declared under agents", where, f.key, name)
			}
		}
		*f.dst = dedupe(names)
	}
	if len(c.AllowSubscribe) > 0 && len(c.Subscribe) > 0 {
		seq := resolve(fields["subscribe"].value)
		for _, name := range c.Subscribe {
			if !contains(c.AllowSubscribe, name) {
				return c, y.errAt(entryNode(seq, name), "%s.subscribe: %q is not in allowSubscribe [%s]: whoever joins a channel must be allowed to read it",
					where, name, strings.Join(c.AllowSubscribe, ", "))
			}
		}
	}
	return c, nil
}

// entryNode returns the first entry of the list seq that is name, or seq itself.
func entryNode(seq *yaml.Node, name string) *yaml.Node {
	for _, n := range seq.Content {
		if n = resolve(n); n.Value == name {
			return n
		}
	}
	return seq
}

// dedupe drops repeats, keeping the first of each.
func dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
