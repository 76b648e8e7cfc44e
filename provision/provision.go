// Package provision creates one space's JetStream footprint: the CHAT, DM and TASK streams,
// the presence and channel-registry KV buckets, the registry's "=defaults" entry, the
// durable plane's INBOX and DLV streams and lease, members and ACL buckets, the manager's
// lease bucket, the auth service's bucket, the task board, file-claims and A2A peer buckets, and the
// control surface's EPJ, EPF and EPC streams. Space is idempotent: it creates what is missing,
// repairs drift that loses nothing, refuses conflicts without changing anything, and never
// touches stored messages.
package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Options tunes what Space creates.
type Options struct {
	DefaultDeliveryClass string        // written under "=defaults" in the channel registry only when absent: "live" (open mesh) or "durable" (auth mesh); "" means "durable"
	LeaseTTL             time.Duration // TTL of the delivery lease bucket; 0 means LeaseTTL (30 s)
	// Replicas is the replica count of every stream and bucket; 0 means 1. More than 1
	// needs a JetStream cluster: Space refuses it on a single server (ErrNotClustered)
	// and, when Peers is known, beyond Peers (ErrNotEnoughPeers). An existing stream with
	// fewer replicas is scaled up in place; one with more keeps them (a note says so).
	Replicas int
	// Peers is the size of the server's JetStream cluster when the caller knows it
	// (JetStreamPeers); 0 means unknown, and then the server alone judges a count.
	Peers int
	// Room, when set, is asked before anything is created whether the broker can hold
	// the streams and buckets Space is about to create (how many); an error refuses the
	// space, changing nothing. An embedded broker's broker.Server.Room checks its
	// open-file limit, which the server itself reports only as a failed create
	// (JetStream error 10049) with part of the space made.
	Room func(streams int) error
}

// ErrNoJetStream reports that the broker has not enabled JetStream for the space's
// account, so none of its streams can exist. It is wrapped with the likely cause and fix.
var ErrNoJetStream = errors.New("JetStream is not enabled for the space's account")

// Report says what Space did: names created, names whose drifted config it repaired, and
// names that already existed as wanted. A name is in exactly one list. The defaults entry is
// named "<channels bucket>/=defaults". Notes names each setting found different and left
// as it is (the server cannot change it in place and the difference loses nothing), with
// the reason; those names are still in Updated or Existing.
type Report struct{ Created, Updated, Existing, Notes []string }

// ErrConflict reports an existing stream or bucket whose config Space cannot repair without
// losing data or changing what it means. Space leaves it, and everything else, unchanged.
var ErrConflict = errors.New("existing config conflicts")

// Space creates whatever of the space's JetStream footprint is missing. It first inspects
// every stream and bucket and refuses, changing nothing, when one conflicts (ErrConflict) or
// the space name is invalid (protocol.ErrInvalidSpace). Then it creates what is absent,
// updates drifted settings that can change without loss (a presence TTL, a dedupe window,
// direct get, discard policy, per-message TTLs, a per-subject limit that grows or that no
// subject holds more messages than), raises the ack wait of role durables made by earlier
// releases (TaskQueues), and writes "=defaults" only when the key is absent.
// Stored messages and registry values are never touched.
func Space(ctx context.Context, js jetstream.JetStream, space string, opts Options) (Report, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return Report{}, fmt.Errorf("provision space %q: %w", space, err)
	}
	class := opts.DefaultDeliveryClass
	if class == "" {
		class = ClassDurable
	}
	if err := checkClass(class); err != nil {
		return Report{}, fmt.Errorf("provision space %q: default delivery class: %w", space, err)
	}

	if opts.LeaseTTL < 0 {
		return Report{}, fmt.Errorf("provision space %q: lease TTL %s: want a positive duration, or 0 for %s", space, opts.LeaseTTL, LeaseTTL)
	}
	leaseTTL := opts.LeaseTTL
	if leaseTTL == 0 {
		leaseTTL = LeaseTTL
	}
	replicas, err := opts.replicas(js)
	if err != nil {
		return Report{}, fmt.Errorf("provision space %q: %w", space, err)
	}
	res := resources(space, leaseTTL, replicas)
	plans := make([]plan, 0, len(res))
	var conflicts []error
	for _, r := range res {
		p, err := inspect(ctx, js, r)
		if errors.Is(err, nats.ErrNoResponders) {
			// The server answers a JetStream request of every account it enabled
			// JetStream for; silence means it did not (its log says why).
			return Report{}, fmt.Errorf("provision space %q: %w: the broker refused to enable it, most often because it cannot reserve the space's storage or memory limits beside the other spaces' (the broker's log says \"insufficient storage resources\"): lower the space's limits (cotal up --max-storage, --max-memory), or give the broker more disk or memory", space, ErrNoJetStream)
		}
		if err != nil {
			return Report{}, r.wrap(space, err)
		}
		if err := p.conflict(); err != nil {
			conflicts = append(conflicts, r.wrap(space, err))
		}
		plans = append(plans, p)
	}
	if len(conflicts) > 0 {
		return Report{}, errors.Join(conflicts...)
	}

	if opts.Room != nil {
		absent := 0
		for _, p := range plans {
			if p.have == nil {
				absent++
			}
		}
		if absent > 0 {
			if err := opts.Room(absent); err != nil {
				return Report{}, fmt.Errorf("provision space %q: %w", space, err)
			}
		}
	}

	var rep Report
	for _, p := range plans {
		o, err := p.apply(ctx, js)
		if err != nil {
			return rep, p.res.wrap(space, err)
		}
		rep.add(o, p.res.name)
		rep.Notes = append(rep.Notes, p.notes()...)
	}

	roles, err := TaskQueues(ctx, js, space)
	if err != nil {
		return rep, err
	}
	rep.Updated = append(rep.Updated, roles.Updated...)

	name := protocol.BucketChannels(space) + "/" + protocol.ChannelDefaultsKey
	o, err := writeDefaults(ctx, js, space, Defaults{DeliveryClass: class})
	if err != nil {
		return rep, fmt.Errorf("provision space %q: key %s: %w", space, name, err)
	}
	rep.add(o, name)
	return rep, nil
}

// outcome is what happened to one name.
type outcome int

const (
	created outcome = iota
	updated
	existing
)

func (r *Report) add(o outcome, name string) {
	switch o {
	case created:
		r.Created = append(r.Created, name)
	case updated:
		r.Updated = append(r.Updated, name)
	default:
		r.Existing = append(r.Existing, name)
	}
}
