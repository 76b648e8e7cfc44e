package provision

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Drift is how one stream or bucket of a space differs from what Space provisions: it is
// absent, or settings that matter to cotal differ. Settings Space leaves as they are on
// purpose (more replicas, a flag the server cannot turn off) are not drift.
type Drift struct {
	Kind     string   `json:"kind"`               // "stream" or "bucket"
	Name     string   `json:"name"`               // the stream or bucket name
	Missing  bool     `json:"missing,omitempty"`  // it does not exist
	Settings []string `json:"settings,omitempty"` // each "<setting> <have>, want <want>"
	// Repairable is true when Space brings it to what it wants without losing anything
	// (creating it, or updating it in place); otherwise Why says what stands in the way.
	Repairable bool   `json:"repairable"`
	Why        string `json:"why,omitempty"`
}

// Inspect compares every stream and bucket of the space with what Space provisions with
// opts, and lists those that differ. It changes nothing: Space with the same opts repairs
// each Repairable one.
func Inspect(ctx context.Context, js jetstream.JetStream, space string, opts Options) ([]Drift, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return nil, fmt.Errorf("inspect space %q: %w", space, err)
	}
	leaseTTL := opts.LeaseTTL
	if leaseTTL <= 0 {
		leaseTTL = LeaseTTL
	}
	replicas, err := opts.replicas(js)
	if err != nil {
		return nil, fmt.Errorf("inspect space %q: %w", space, err)
	}
	var out []Drift
	for _, r := range resources(space, leaseTTL, replicas) {
		p, err := inspect(ctx, js, r)
		if err != nil {
			return nil, fmt.Errorf("inspect space %q: %s %s: %w", space, r.kind, r.name, err)
		}
		d := Drift{Kind: r.kind, Name: r.name, Missing: p.have == nil}
		for _, x := range p.drifts {
			if x.kept == "" {
				d.Settings = append(d.Settings, x.String())
			}
		}
		if !d.Missing && len(d.Settings) == 0 {
			continue
		}
		d.Repairable = true
		if cerr := p.conflict(); cerr != nil {
			d.Repairable, d.Why = false, cerr.Error()
		}
		out = append(out, d)
	}
	return out, nil
}
