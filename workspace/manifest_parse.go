package workspace

import (
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/protocol"
)

// The keys each manifest mapping knows.
func topKeys() []string {
	return []string{"apiVersion", "kind", "space", "broker", "limits", "runtime", "agent", "personaPermissions", "defaults", "agents", "channels"}
}

// ParseManifest parses a team manifest. Unknown keys, values of the wrong shape, channels
// naming undeclared agents, wildcard channel names, a subscriber outside allowSubscribe
// and names that are not actor tokens are refused with a *ParseError naming path and line.
func ParseManifest(path string, data []byte) (*Manifest, error) {
	y := &yamlFile{path: path}
	top, err := y.topLevel(data)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Path: path, PersonaPermissions: PersonaReject, Broker: ManifestBroker{Auth: AuthStatic}}
	if err := y.header(top, m); err != nil {
		return nil, err
	}
	if err := y.settings(top, m); err != nil {
		return nil, err
	}
	if err := y.entries(top, m); err != nil {
		return nil, err
	}
	sort.Slice(m.Agents, func(i, j int) bool { return m.Agents[i].Name < m.Agents[j].Name })
	sort.Slice(m.Channels, func(i, j int) bool { return m.Channels[i].Name < m.Channels[j].Name })
	return m, nil
}

// topLevel reads the document's top-level mapping: within the size limit, not empty, only
// known keys, and the required ones present.
func (y *yamlFile) topLevel(data []byte) (map[string]*keyValue, error) {
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
	for _, k := range []string{"apiVersion", "kind", "space", "channels"} {
		if top[k] == nil {
			return nil, y.errLine(1, "%s is required", k)
		}
	}
	return top, nil
}

// header reads apiVersion and kind, which must be this package's, and the space.
func (y *yamlFile) header(top map[string]*keyValue, m *Manifest) error {
	for _, f := range []struct{ key, want string }{{"apiVersion", ManifestAPIVersion}, {"kind", ManifestKind}} {
		v, err := y.str(top[f.key].value, f.key)
		if err != nil {
			return err
		}
		if v != f.want {
			return y.errAt(top[f.key].value, "%s %q: want %s", f.key, v, f.want)
		}
	}
	var err error
	if m.Space, err = y.str(top["space"].value, "space"); err != nil {
		return err
	}
	if err := protocol.CheckSpace(m.Space); err != nil {
		return y.errAt(top["space"].value, "space: %w", err)
	}
	return nil
}

// settings reads the space-wide settings: broker, limits, runtime, agent,
// personaPermissions and the channel defaults.
func (y *yamlFile) settings(top map[string]*keyValue, m *Manifest) error {
	var err error
	if kv := top["broker"]; kv != nil {
		if m.Broker, err = y.broker(kv.value); err != nil {
			return err
		}
	}
	if kv := top["limits"]; kv != nil {
		if m.Limits, err = y.limits(kv.value); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"runtime", &m.Runtime}, {"agent", &m.Agent}} {
		if kv := top[f.key]; kv != nil {
			if *f.dst, err = y.token(kv.value, f.key); err != nil {
				return err
			}
		}
	}
	if kv := top["personaPermissions"]; kv != nil {
		if m.PersonaPermissions, err = y.personaPermissions(kv.value); err != nil {
			return err
		}
		if m.PersonaPermissions == "" {
			m.PersonaPermissions = PersonaReject
		}
	}
	if kv := top["defaults"]; kv != nil {
		fields, err := y.known(kv.value, "defaults", defaultKeys())
		if err != nil {
			return err
		}
		if m.Defaults, err = y.channelDefaults(fields, "defaults"); err != nil {
			return err
		}
	}
	return nil
}

// entries reads the agents, then the channels, which may name only declared agents.
func (y *yamlFile) entries(top map[string]*keyValue, m *Manifest) error {
	declared := map[string]bool{}
	if kv := top["agents"]; kv != nil && !isNull(kv.value) {
		pairs, err := y.mapping(kv.value, "agents")
		if err != nil {
			return err
		}
		for _, p := range pairs {
			a, err := y.agent(p)
			if err != nil {
				return err
			}
			declared[a.Name] = true
			m.Agents = append(m.Agents, a)
		}
	}
	if v := top["channels"].value; !isNull(v) {
		pairs, err := y.mapping(v, "channels")
		if err != nil {
			return err
		}
		for _, p := range pairs {
			c, err := y.channel(p, declared)
			if err != nil {
				return err
			}
			m.Channels = append(m.Channels, c)
		}
	}
	return nil
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
