package workspace

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// AgentNamed returns the agent name and whether the manifest declares it.
func (m *Manifest) AgentNamed(name string) (*ManifestAgent, bool) {
	for i := range m.Agents {
		if m.Agents[i].Name == name {
			return &m.Agents[i], true
		}
	}
	return nil, false
}

// PersonaFile returns the file of a's persona, resolved against the manifest's folder, or
// "" for an inline agent.
func (m *Manifest) PersonaFile(a *ManifestAgent) string {
	if a.Persona == "" {
		return ""
	}
	p := filepath.FromSlash(a.Persona)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(m.Path), p)
}

// LoadPersonas reads the persona file of every agent that names one, keyed by agent name.
// An unreadable or invalid file is an error at the agent's manifest line that carries the
// persona's own file:line.
func (m *Manifest) LoadPersonas() (map[string]*Persona, error) {
	out := map[string]*Persona{}
	for i := range m.Agents {
		a := &m.Agents[i]
		path := m.PersonaFile(a)
		if path == "" {
			continue
		}
		data, err := readLimited(path, MaxPersonaSize)
		if err != nil {
			return nil, &ParseError{Path: m.Path, Line: a.Line, Err: fmt.Errorf("agent %q: persona: %w", a.Name, err)}
		}
		per, err := ParsePersona(path, data)
		if err != nil {
			return nil, &ParseError{Path: m.Path, Line: a.Line, Err: fmt.Errorf("agent %q: persona: %w", a.Name, err)}
		}
		out[a.Name] = per
	}
	return out, nil
}

// Access resolves the manifest alone: the channel-centric lists inverted into one
// least-privilege access per declared agent (persona grants are not consulted).
func (m *Manifest) Access() map[string]AgentAccess {
	return m.AccessWith(nil)
}

// AccessWith is Access with the agents' personas (from LoadPersonas). An agent's role is its
// manifest role, else its persona's. With personaPermissions include (the agent's, else the
// manifest's), a persona's subscribe, read and post entries are added when they cannot name a
// channel the manifest declares: the manifest stays the whole truth for its own channels.
// An agent left with no channel to join or read is DM-only: its Subscribe and
// AllowSubscribe are empty, non-nil lists (protocol.ReadSet), so the mint keeps them.
func (m *Manifest) AccessWith(personas map[string]*Persona) map[string]AgentAccess {
	type sets struct{ sub, read, pub map[string]bool }
	acc := make(map[string]*sets, len(m.Agents))
	for _, a := range m.Agents {
		acc[a.Name] = &sets{sub: map[string]bool{}, read: map[string]bool{}, pub: map[string]bool{}}
	}
	for _, c := range m.Channels {
		for _, n := range c.Subscribe {
			acc[n].sub[c.Name] = true
		}
		for _, n := range c.Readers() {
			acc[n].read[c.Name] = true
		}
		for _, n := range c.AllowPublish {
			acc[n].pub[c.Name] = true
		}
	}
	undeclared := func(pattern string) bool {
		for _, c := range m.Channels {
			if patternsOverlap(pattern, c.Name) {
				return false
			}
		}
		return true
	}
	out := make(map[string]AgentAccess, len(m.Agents))
	for _, a := range m.Agents {
		s, per := acc[a.Name], personas[a.Name]
		role, included := a.Role, false
		if per != nil {
			if role == "" {
				role = per.Role
			}
			mode := a.PersonaPermissions
			if mode == "" {
				mode = m.PersonaPermissions
			}
			if included = mode == PersonaInclude; included {
				for _, l := range []struct {
					from []string
					to   map[string]bool
				}{{per.BootSet(), s.sub}, {per.ReadACL(), s.read}, {per.AllowPublish, s.pub}} {
					for _, ch := range l.from {
						if undeclared(ch) {
							l.to[ch] = true
						}
					}
				}
				// A boot join kept while the ACL entry covering it overlapped a declared
				// channel (and was dropped) is granted by its own name.
				read := keys(s.read)
				for ch := range s.sub {
					if !protocol.ChannelCovered(read, ch) {
						s.read[ch] = true
					}
				}
			}
		}
		acc := AgentAccess{Role: role, Subscribe: keys(s.sub), AllowSubscribe: keys(s.read), AllowPublish: keys(s.pub)}
		if acc.Subscribe == nil && acc.AllowSubscribe == nil {
			// No channel names the agent and no included persona gives it a read set: it
			// reads nothing (DM-only), as the reference's provision.ts does; general is
			// never implied (protocol.ReadSet).
			acc.Subscribe, acc.AllowSubscribe = protocol.ReadSet(nil, nil)
		}
		out[a.Name] = acc
	}
	return out
}

// keys returns the members of set, sorted; nil for an empty set.
func keys(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// patternsOverlap reports whether some concrete channel matches both patterns.
func patternsOverlap(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(as) && i == len(bs):
			return true
		case i == len(as) || i == len(bs):
			return false
		case as[i] == ">" || bs[i] == ">":
			return true // the rest of the other has at least one segment, or can have
		case as[i] != "*" && bs[i] != "*" && as[i] != bs[i]:
			return false
		}
	}
}
