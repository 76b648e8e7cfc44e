package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Delivery classes of a channel (wire-protocol §7.1).
const (
	ClassLive    = "live"    // live subscribers only; the open mesh, which has no delivery daemon
	ClassDurable = "durable" // backed by the delivery daemon; the built-in default
)

// Defaults is the space-wide channel defaults stored under "=defaults" in the channel
// registry. An absent field falls back to the built-in value (replay on, class durable).
type Defaults struct {
	Replay        *bool  `json:"replay,omitempty"`
	ReplayWindow  string `json:"replayWindow,omitempty"`  // like "30m": digits then s, m, h or d
	DeliveryClass string `json:"deliveryClass,omitempty"` // ClassLive or ClassDurable
}

// EffectiveDeliveryClass is the class a channel without its own class gets.
func (d Defaults) EffectiveDeliveryClass() string {
	if d.DeliveryClass == "" {
		return ClassDurable
	}
	return d.DeliveryClass
}

// EffectiveReplay reports whether a channel without its own replay setting replays on join.
func (d Defaults) EffectiveReplay() bool { return d.Replay == nil || *d.Replay }

var replayWindowRE = regexp.MustCompile(`^\d+(s|m|h|d)$`)

// Validate refuses values the registry must not hold.
func (d Defaults) Validate() error {
	if d.DeliveryClass != "" {
		if err := checkClass(d.DeliveryClass); err != nil {
			return err
		}
	}
	if d.ReplayWindow != "" && !replayWindowRE.MatchString(d.ReplayWindow) {
		return fmt.Errorf("replay window %q: want digits then s, m, h or d (like 30m)", d.ReplayWindow)
	}
	return nil
}

func checkClass(c string) error {
	if c != ClassLive && c != ClassDurable {
		return fmt.Errorf("delivery class %q: want %q or %q", c, ClassLive, ClassDurable)
	}
	return nil
}

// ChannelDefaults reads the space's "=defaults" entry. An absent entry gives the zero
// Defaults (built-in values); a missing bucket wraps jetstream.ErrBucketNotFound.
func ChannelDefaults(ctx context.Context, js jetstream.JetStream, space string) (Defaults, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return Defaults{}, fmt.Errorf("channel defaults of space %q: %w", space, err)
	}
	bucket := protocol.BucketChannels(space)
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return Defaults{}, fmt.Errorf("channel defaults of space %q: bucket %s: %w", space, bucket, err)
	}
	e, err := kv.Get(ctx, protocol.ChannelDefaultsKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Defaults{}, nil
	}
	if err != nil {
		return Defaults{}, fmt.Errorf("channel defaults of space %q: read %s: %w", space, protocol.ChannelDefaultsKey, err)
	}
	var d Defaults
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return Defaults{}, fmt.Errorf("channel defaults of space %q: decode %s: %w", space, protocol.ChannelDefaultsKey, err)
	}
	if err := d.Validate(); err != nil {
		return Defaults{}, fmt.Errorf("channel defaults of space %q: %w", space, err)
	}
	return d, nil
}

// writeDefaults stores d under "=defaults" unless a value is already there.
func writeDefaults(ctx context.Context, js jetstream.JetStream, space string, d Defaults) (outcome, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketChannels(space))
	if err != nil {
		return 0, fmt.Errorf("open bucket: %w", err)
	}
	if _, err := kv.Create(ctx, protocol.ChannelDefaultsKey, data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return existing, nil
		}
		return 0, fmt.Errorf("create: %w", err)
	}
	return created, nil
}
