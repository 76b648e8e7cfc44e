package provision

import (
	"github.com/nats-io/nats.go/jetstream"
)

// Streams lists the JetStream streams Space makes for space, KV buckets as their KV_
// streams, each as Space creates it at one replica, in creation order. It is the space's
// whole footprint: a backup checks a space's stream set against it, and restores each
// stream with this config rather than one carried in an archive.
func Streams(space string) []jetstream.StreamConfig {
	res := footprint(space, LeaseTTL)
	out := make([]jetstream.StreamConfig, len(res))
	for i, r := range res {
		out[i] = r.want
	}
	return out
}
