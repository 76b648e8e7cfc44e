package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// plan is what Space found for one resource before changing anything.
type plan struct {
	res    resource
	have   *jetstream.StreamConfig // nil when absent
	drifts []drift                 // differences from res.want, when present
	holder string                  // when absent: another stream already storing its subjects
}

// inspect reads the resource's current state; it changes nothing.
func inspect(ctx context.Context, js jetstream.JetStream, r resource) (plan, error) {
	p := plan{res: r}
	st, err := js.Stream(ctx, r.want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		holder, err := js.StreamNameBySubject(ctx, r.want.Subjects[0])
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return p, fmt.Errorf("look up subjects %s: %w", r.want.Subjects[0], err)
		case holder == r.want.Name:
			// Created by someone else between the two reads: judge what they made.
			return inspect(ctx, js, r)
		default:
			p.holder = holder
		}
		return p, nil
	case err != nil:
		return p, fmt.Errorf("read config: %w", err)
	}
	have := st.CachedInfo().Config
	p.have = &have
	p.drifts = compare(have, r.want, r.kv != nil)
	for i := range p.drifts {
		if d := &p.drifts[i]; d.lower > 0 {
			if err := judgeLowering(ctx, st, d); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// judgeLowering allows lowering the per-subject limit to d.lower when no subject of the
// stream holds more messages than that, so the change drops nothing; otherwise it names
// the fullest subject in d.why.
func judgeLowering(ctx context.Context, st jetstream.Stream, d *drift) error {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return fmt.Errorf("read subject counts: %w", err)
	}
	var fullest string
	var most uint64
	for subj, n := range info.State.Subjects {
		if n > most || (n == most && subj < fullest) {
			fullest, most = subj, n
		}
	}
	if most <= uint64(d.lower) {
		n := d.lower
		d.fix = func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = n }
		return nil
	}
	d.why = fmt.Sprintf("subject %s holds %d messages: lowering the limit would drop its oldest %d", fullest, most, most-uint64(d.lower))
	return nil
}

// conflict is non-nil when the resource cannot be brought to its wanted config without loss.
func (p plan) conflict() error {
	if p.have == nil {
		if p.holder != "" {
			return fmt.Errorf("%w: subjects %s are already stored by stream %s; nothing was changed: remove or rename that stream by hand",
				ErrConflict, strings.Join(p.res.want.Subjects, ", "), p.holder)
		}
		return nil
	}
	var bad []string
	for _, d := range p.drifts {
		if d.fix == nil && d.kept == "" {
			bad = append(bad, d.String())
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; nothing was changed: fix or remove it by hand", ErrConflict, strings.Join(bad, "; "))
}

// apply creates the resource, repairs its drift, or leaves it alone.
func (p plan) apply(ctx context.Context, js jetstream.JetStream) (outcome, error) {
	if p.have != nil {
		return p.repair(ctx, js)
	}
	err := p.create(ctx, js)
	if err == nil {
		return created, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return 0, fmt.Errorf("create: %w", err)
	}
	// Someone created it since inspect: judge what they made.
	again, ierr := inspect(ctx, js, p.res)
	if ierr != nil {
		return 0, ierr
	}
	if again.have == nil {
		return 0, fmt.Errorf("create: %w", err)
	}
	if cerr := again.conflict(); cerr != nil {
		return 0, cerr
	}
	return again.repair(ctx, js)
}

func (p plan) create(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateStream(ctx, p.res.want)
	return err
}

// notes describes the drift left as it is.
func (p plan) notes() []string {
	var out []string
	for _, d := range p.drifts {
		if d.kept != "" {
			out = append(out, fmt.Sprintf("%s %s: %s kept: %s", p.res.kind, p.res.name, d.String(), d.kept))
		}
	}
	return out
}

// repair updates the fixable drift of an existing resource; the caller has checked conflict.
func (p plan) repair(ctx context.Context, js jetstream.JetStream) (outcome, error) {
	cfg := *p.have
	var what []string
	scale := false
	for _, d := range p.drifts {
		if d.fix != nil {
			d.fix(&cfg)
			what = append(what, d.String())
			scale = scale || d.scale
		}
	}
	if len(what) == 0 {
		return existing, nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		if scale {
			// The stream keeps its replicas and its messages: scaling it is the
			// operator's move (more servers, or a copy into a new stream).
			return 0, fmt.Errorf("%w: %s has %d replica(s), want %d: the server refused to scale it in place (%v); its messages are unchanged: "+
				"add JetStream servers to the cluster and run cotal up again, or move it with `nats stream backup %s` and `nats stream restore --replicas %d`, "+
				"or keep %d replica(s) with `cotal up --replicas %d`",
				ErrScale, p.have.Name, replicaCount(p.have.Replicas), cfg.Replicas, err, p.have.Name, cfg.Replicas, replicaCount(p.have.Replicas), replicaCount(p.have.Replicas))
		}
		return 0, fmt.Errorf("update %s: %w", strings.Join(what, "; "), err)
	}
	if scale {
		if err := awaitReplicas(ctx, js, cfg.Name, replicaCount(cfg.Replicas)); err != nil {
			return 0, err
		}
	}
	return updated, nil
}

// settleWait bounds how long a scaled stream may take to elect a leader and bring its new
// replicas up to date.
const settleWait = 30 * time.Second

// awaitReplicas waits until stream has a leader and want-1 current followers, so what is
// written next (a KV row of a scaled bucket) does not time out on an election.
func awaitReplicas(ctx context.Context, js jetstream.JetStream, stream string, want int) error {
	deadline := time.Now().Add(settleWait)
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			if c := s.CachedInfo().Cluster; c != nil && c.Leader != "" && len(c.Replicas) >= want-1 && allCurrent(c.Replicas) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s scaled to %d replicas but did not settle within %s (last error: %v); run cotal up again once the cluster is healthy", stream, want, settleWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // poll interval
		}
	}
}

func allCurrent(peers []*jetstream.PeerInfo) bool {
	for _, p := range peers {
		if !p.Current {
			return false
		}
	}
	return true
}
