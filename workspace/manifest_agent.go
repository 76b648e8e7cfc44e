package workspace

import (
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/protocol"
)

// agentKeys are the keys an agent entry knows.
func agentKeys() []string {
	return []string{"persona", "agent", "cwd", "model", "variant", "role", "description", "instructions", "prompt",
		"capabilities", "continuity", "personaPermissions", "launchOptions"}
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
			if f.key == "role" && *f.dst != "" {
				if err := protocol.CheckRole(*f.dst); err != nil {
					return a, y.errAt(kv.value, "%s.role: %v", where, err)
				}
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
			if err := CheckCapability(c); err != nil {
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
