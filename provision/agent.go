package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// AckWait is how long a DM or hand-off copy waits for its ack before redelivery: the
// reference's 60 s, which a TypeScript `cotal up` checks when it adds the same durable
// (a different wait makes its add fail). A clean exit hands unread copies back at once;
// only a killed holder's copies wait it out. An anycast copy waits
// protocol.AnycastAckWait (also 60 s).
const AckWait = 60 * time.Second

// Agent pre-creates the durables an agent credential may only bind, never create, as the
// reference's provisionAgent does at mint and spawn: its DM durable
// dm_<owner>-<actor>-<uid>, its hand-off durable dlv_<owner>-<actor>-<uid> (Handoff), its
// two public-bucket watchers (KVWatches) and, with a role, the role-shared svc_<role>. A new
// DM durable starts after DM's current last message (the activation frontier); an existing
// one is left exactly as it is, so nothing waiting in it is lost. An existing svc_<role>
// with the earlier Go ack wait is raised to the reference's in place (TaskQueue). It
// reports the names it created, updated and found.
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
	if err := handoff(ctx, js, space, p, uid, &rep); err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	if err := ensureKVWatches(ctx, js, space, p, uid, &rep); err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	if role == "" {
		return rep, nil
	}
	if err := taskQueue(ctx, js, space, role, &rep); err != nil {
		return rep, fmt.Errorf("provision agent %s: %w", p, err)
	}
	return rep, nil
}

// HandoffConfig is the bind-only hand-off durable of one member incarnation on DLV, the
// reference's (streams.ts dlvDurableConfig): its own dlv subject, explicit acks, 60 s,
// every stored copy, no max_ack_pending.
func HandoffConfig(space string, p protocol.Principal, uid string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerDLV(p, uid),
		FilterSubject: protocol.DLVSubject(space, p, uid),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// Handoff pre-creates the hand-off durable of p's incarnation uid unless it exists (the
// reference's provisionDlvInbox, which its provisionAgent runs at mint and spawn): a
// member can then bind it at once, so copies any delivery daemon stores there (a
// reference daemon creates none) reach it. An existing durable is left as it is.
func Handoff(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string) (Report, error) {
	var rep Report
	if err := p.Validate(); err != nil {
		return rep, fmt.Errorf("provision hand-off durable: %w", err)
	}
	if !protocol.ValidLifecycleUID(uid) {
		return rep, fmt.Errorf("provision hand-off durable of %s: lifecycle uid %q is not 26 to 32 of a-z 0-9", p, uid)
	}
	if err := handoff(ctx, js, space, p, uid, &rep); err != nil {
		return rep, fmt.Errorf("provision hand-off durable of %s: %w", p, err)
	}
	return rep, nil
}

func handoff(ctx context.Context, js jetstream.JetStream, space string, p protocol.Principal, uid string, rep *Report) error {
	dlv := protocol.StreamDLV(space)
	if _, err := js.Stream(ctx, dlv); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s is missing: run `cotal up --space %s` to provision the space: %w", dlv, space, err)
		}
		return fmt.Errorf("stream %s: %w", dlv, err)
	}
	return ensureConsumer(ctx, js, dlv, HandoffConfig(space, p, uid), rep)
}

// TaskQueueConfig is a role's shared anycast durable svc_<role> on TASK, the reference's
// (streams.ts taskDurableConfig): the role's svc subjects, explicit acks, 60 s.
func TaskQueueConfig(space, role string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerRole(role),
		FilterSubject: protocol.RoleFilter(space, role),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       protocol.AnycastAckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// taskQueue creates the role's durable, or raises an existing one's earlier Go ack wait.
func taskQueue(ctx context.Context, js jetstream.JetStream, space, role string, rep *Report) error {
	stream := protocol.StreamTask(space)
	cfg := TaskQueueConfig(space, role)
	c, err := js.Consumer(ctx, stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return ensureConsumer(ctx, js, stream, cfg, rep)
	case err != nil:
		return fmt.Errorf("durable %s on %s: %w", cfg.Durable, stream, err)
	}
	o, err := raiseAckWait(ctx, js, stream, c.CachedInfo().Config)
	if err != nil {
		return err
	}
	rep.add(o, cfg.Durable)
	return nil
}

// raiseAckWait updates an anycast durable made with the earlier Go ack wait to the
// reference's, in place: the asks waiting in it and the ones held by a holder stay where
// they are. Any other durable is left as it is.
func raiseAckWait(ctx context.Context, js jetstream.JetStream, stream string, have jetstream.ConsumerConfig) (outcome, error) {
	if have.AckWait != protocol.AnycastAckWaitGo0 || have.AckPolicy != jetstream.AckExplicitPolicy {
		return existing, nil
	}
	have.AckWait = protocol.AnycastAckWait
	if _, err := js.UpdateConsumer(ctx, stream, have); err != nil {
		return 0, fmt.Errorf("durable %s on %s: raise ack wait %s to %s: %w", have.Durable, stream, protocol.AnycastAckWaitGo0, protocol.AnycastAckWait, err)
	}
	return updated, nil
}

// TaskQueues raises every svc_<role> durable of the space made with the earlier Go ack
// wait to the reference's, in place, and reports the names it updated. Space runs it, so
// `cotal up` migrates a space's roles whether or not their agents are minted again.
func TaskQueues(ctx context.Context, js jetstream.JetStream, space string) (Report, error) {
	var rep Report
	stream := protocol.StreamTask(space)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return rep, fmt.Errorf("provision space %q: stream %s: %w", space, stream, err)
	}
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		if !strings.HasPrefix(info.Name, "svc_") {
			continue
		}
		o, err := raiseAckWait(ctx, js, stream, info.Config)
		if err != nil {
			return rep, fmt.Errorf("provision space %q: %w", space, err)
		}
		if o == updated {
			rep.add(o, info.Name)
		}
	}
	if err := lister.Err(); err != nil {
		return rep, fmt.Errorf("provision space %q: stream %s: list durables: %w", space, stream, err)
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
