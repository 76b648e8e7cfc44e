package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// AckWait is how long a copy on a hand-off durable waits for its ack before redelivery
// (the reference's 60 s). An anycast copy waits protocol.AnycastAckWait, a DM copy
// DMAckWait.
const AckWait = 60 * time.Second

// DMAckWait is the ack wait of an agent's DM durable: how soon a DM held by an agent that
// died (a killed `cotal mcp`) goes to its next session. It is shorter than the
// reference's 60 s because an agent is interactive: a live holder marks the copies it
// holds in progress (every 3 s in `cotal mcp`), so only a dead holder's wait runs out.
const DMAckWait = 10 * time.Second

// Agent pre-creates the durables an agent credential may only bind, never create: its DM
// durable dm_<owner>-<actor>-<uid> and, with a role, the role-shared svc_<role>. A new DM
// durable starts after DM's current last message (the activation frontier); an existing
// one keeps everything but its ack wait, which is set to DMAckWait (an update that loses
// nothing waiting in it). It reports the names it created, updated and found as they are.
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
		AckWait:       DMAckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if last := s.CachedInfo().State.LastSeq; last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last+1
	}
	if err := ensureDMConsumer(ctx, js, dm, cfg, &rep); err != nil {
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

// ensureDMConsumer is ensureConsumer for a DM durable, whose existing ack wait is set to
// cfg's (made with the reference's 60 s, or by an earlier cotal); nothing else changes.
func ensureDMConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, rep *Report) error {
	c, err := js.Consumer(ctx, stream, cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return ensureConsumer(ctx, js, stream, cfg, rep)
	}
	if err != nil {
		return fmt.Errorf("durable %s on %s: %w", cfg.Durable, stream, err)
	}
	have := c.CachedInfo().Config
	if have.AckWait == cfg.AckWait {
		rep.add(existing, cfg.Durable)
		return nil
	}
	have.AckWait = cfg.AckWait
	if _, err := js.UpdateConsumer(ctx, stream, have); err != nil {
		return fmt.Errorf("set the ack wait of durable %s on %s to %s: %w", cfg.Durable, stream, cfg.AckWait, err)
	}
	rep.add(updated, cfg.Durable)
	return nil
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
