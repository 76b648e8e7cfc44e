package workspace

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/protocol"
)

// defaultKeys are the keys of the channel defaults.
func defaultKeys() []string { return []string{"replay", "replayWindow", "deliveryClass"} }

// channelKeys are the keys a channel entry knows.
func channelKeys() []string {
	return []string{"description", "instructions", "replay", "replayWindow", "deliveryClass", "subscribe", "allowSubscribe", "allowPublish"}
}

// checkReplayWindow checks a replay window against the registry's grammar, ^[0-9]+[smhd]$,
// refusing a zero window and one over protocol.MaxReplayWindow (see ParseReplayWindow).
func checkReplayWindow(s string) error {
	_, err := protocol.ParseReplayWindow(s)
	return err
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
		if d.ReplayWindow != "" {
			if err := checkReplayWindow(d.ReplayWindow); err != nil {
				return d, y.errAt(kv.value, "%s.replayWindow %q: %v", where, d.ReplayWindow, err)
			}
		}
	}
	if kv := fields["deliveryClass"]; kv != nil {
		if d.DeliveryClass, err = y.oneOf(kv.value, where+".deliveryClass", DeliveryLive, DeliveryDurable); err != nil {
			return d, err
		}
	}
	return d, nil
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
