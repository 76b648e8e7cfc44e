package provision

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// KVWatchConfig is the consumer of one lifecycle's watcher of a public bucket, as the
// reference's trusted provisioner makes it (packages/core smoke agent-watch-cleanup-auth:
// a named push consumer on KV_<bucket>, filter $KV.<bucket>.>, the last value of every key
// first, explicit acks, delivering to the lifecycle's fixed rail protocol.KVWatchSubject).
// It is durable and has no inactivity threshold: the agent only binds it, so one reaped
// while it is away could not come back. The agent may delete it when it stops for good.
func KVWatchConfig(space string, k protocol.KVWatch, p protocol.Principal, uid string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        protocol.ConsumerKVWatch(k, p, uid),
		DeliverSubject: protocol.KVWatchSubject(space, k, p, uid),
		FilterSubject:  "$KV." + k.Bucket(space) + ".>",
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
	}
}

// KVWatches pre-creates a lifecycle's two public-bucket watchers (presence and the channel
// registry), which its credential may bind and delete but never create. An existing
// watcher is left as it is.
func KVWatches(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string) (Report, error) {
	var rep Report
	err := ensureKVWatches(ctx, js, space, p, uid, &rep)
	return rep, err
}

// ensureKVWatches is KVWatches reporting into rep.
func ensureKVWatches(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string, rep *Report) error {
	for _, k := range protocol.KVWatches {
		cfg := KVWatchConfig(space, k, p, uid)
		if err := ensurePushConsumer(ctx, js, "KV_"+k.Bucket(space), cfg, rep); err != nil {
			return fmt.Errorf("provision watchers of %s: %w", p, err)
		}
	}
	return nil
}

// ensurePushConsumer creates cfg's push durable on stream unless it exists; an existing
// one is never changed.
func ensurePushConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, rep *Report) error {
	_, err := js.PushConsumer(ctx, stream, cfg.Durable)
	switch {
	case err == nil:
		rep.add(existing, cfg.Durable)
		return nil
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("watcher %s on %s: %w", cfg.Durable, stream, err)
	}
	if _, err := js.CreatePushConsumer(ctx, stream, cfg); err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("create watcher %s on %s: %w", cfg.Durable, stream, err)
	}
	rep.add(created, cfg.Durable)
	return nil
}
