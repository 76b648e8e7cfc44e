package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	return p, nil
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
		if d.fix == nil {
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
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && !errors.Is(err, jetstream.ErrBucketExists) {
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
	if p.res.kv != nil && !p.res.asStream {
		_, err := js.CreateKeyValue(ctx, *p.res.kv)
		return err
	}
	_, err := js.CreateStream(ctx, p.res.want)
	return err
}

// repair updates the fixable drift of an existing resource; the caller has checked conflict.
func (p plan) repair(ctx context.Context, js jetstream.JetStream) (outcome, error) {
	if len(p.drifts) == 0 {
		return existing, nil
	}
	cfg := *p.have
	what := make([]string, 0, len(p.drifts))
	for _, d := range p.drifts {
		d.fix(&cfg)
		what = append(what, d.String())
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return 0, fmt.Errorf("update %s: %w", strings.Join(what, "; "), err)
	}
	return updated, nil
}
