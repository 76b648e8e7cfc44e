package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// AckWait is how long a DM or hand-off copy waits for its ack before redelivery: the
// reference's 60 s, which a TypeScript `cotal up` checks when it adds the same durable
// (a different wait makes its add fail). A clean exit hands unread copies back at once;
// only a killed holder's copies wait it out. An anycast copy waits
// protocol.AnycastAckWait.
const AckWait = 60 * time.Second

// Agent pre-creates the durables an agent credential may only bind, never create: its DM
// durable dm_<owner>-<actor>-<uid>, its two public-bucket watchers (KVWatches) and, with a
// role, the role-shared svc_<role>. A new DM
// durable starts after DM's current last message (the activation frontier); an existing
// one is left exactly as it is, so nothing waiting in it is lost. It reports the names it
// created and the ones that already existed.
func Agent(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid, role string) (Report, error) {
	var rep Report
	if err := p.Validate(); err != nil {
		return rep, fmt.Errorf("provision agent: %w", err)
	}
	if !protocol.ValidLifecycleUID(uid) {
		return rep, fmt.Errorf("provision agent %s: lifecycle uid %q is not 26 to 32 of a-z 0-9", p, uid)
	}
	if role != "" {
		if err := protocol.CheckRole(role); err != nil {
			return rep, fmt.Errorf("provision agent %s: %w", p, err)
		}
	}
	dm := protocol.StreamDM(space)
	s, err := js.Stream(ctx, dm)
	if err != nil {
		return rep, fmt.Errorf("provision agent %s: stream %s: %w", p, dm, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerDM(p, uid),
		FilterSubject: protocol.DMFilter(space, p),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if last := s.CachedInfo().State.LastSeq; last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last+1
	}
	if err := ensureConsumer(ctx, js, dm, cfg, &rep); err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	if err := ensureKVWatches(ctx, js, space, p, uid, &rep); err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	if role == "" {
		return rep, nil
	}
	err = ensureConsumer(ctx, js, protocol.StreamTask(space), jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerRole(role),
		FilterSubject: protocol.RoleFilter(space, role),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       protocol.AnycastAckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}, &rep)
	if err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	return rep, nil
}

// ensureConsumer creates cfg's durable on stream unless it exists; an existing one is
// never changed.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, rep *Report) error {
	_, err := js.Consumer(ctx, stream, cfg.Durable)
	switch {
	case err == nil:
		rep.add(existing, cfg.Durable)
		return nil
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("durable %s on %s: %w", cfg.Durable, stream, err)
	}
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("create durable %s on %s: %w", cfg.Durable, stream, err)
	}
	rep.add(created, cfg.Durable)
	return nil
}
