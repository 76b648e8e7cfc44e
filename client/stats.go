package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// ChannelStat is one channel of the space: its registry entry, if any, and how many
// messages the space's history holds for it.
type ChannelStat struct {
	Name     string        `json:"name"`
	Messages uint64        `json:"messages"`
	Config   ChannelConfig `json:"config"`
}

// ChannelStats lists every channel that has history or a registry entry, sorted by name.
// The registry is read by batch Direct Get, without a consumer.
func (e *Endpoint) ChannelStats(ctx context.Context) ([]ChannelStat, error) {
	stream := protocol.StreamChat(e.cfg.Space)
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		return nil, e.streamErr(stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(protocol.ChatAll(e.cfg.Space)))
	if err != nil {
		return nil, fmt.Errorf("channels: %w", err)
	}
	byName := map[string]*ChannelStat{}
	stat := func(name string) *ChannelStat {
		if byName[name] == nil {
			byName[name] = &ChannelStat{Name: name}
		}
		return byName[name]
	}
	for subject, n := range info.State.Subjects {
		if sub, err := protocol.ParseSubject(subject); err == nil && sub.Kind == protocol.KindChat {
			stat(sub.Channel).Messages += n
		}
	}
	recs, err := e.scanBucket(ctx, protocol.BucketChannels(e.cfg.Space))
	if err != nil {
		return nil, fmt.Errorf("channel registry: %w", err)
	}
	for _, r := range recs {
		if r.op != jetstream.KeyValuePut || r.key == protocol.ChannelDefaultsKey {
			continue
		}
		c := stat(r.key)
		if err := json.Unmarshal(r.value, &c.Config); err != nil {
			return nil, fmt.Errorf("channel registry %q: %w", r.key, err)
		}
	}
	out := make([]ChannelStat, 0, len(byName))
	for _, c := range byName {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
