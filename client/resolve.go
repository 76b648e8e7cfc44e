package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// ErrUnknownPeer reports a name that is neither in the roster nor has a DM durable.
var ErrUnknownPeer = errors.New("unknown peer")

// ErrAmbiguousPeer reports a name held by more than one online peer.
var ErrAmbiguousPeer = errors.New("ambiguous peer")

// Target is a resolved DM recipient and its state at resolution time.
type Target struct {
	Principal protocol.Principal
	Name      string
	State     protocol.Status // offline when only its DM durable is known
}

// Resolve finds the peer a person means by name (case-insensitive display name, or a
// dot-form principal). A peer in the roster wins, online ones first; one that left but
// whose DM durable exists on this space resolves as offline, so a DM waits for it.
func (e *Endpoint) Resolve(ctx context.Context, name string) (Target, error) {
	peers, err := e.Roster(ctx)
	if err != nil {
		return Target{}, err
	}
	var online, offline []Peer
	for _, p := range peers {
		if strings.EqualFold(p.Card.Name, name) || p.Card.ID == name {
			if p.Online {
				online = append(online, p)
			} else {
				offline = append(offline, p)
			}
		}
	}
	pick := online
	if len(pick) == 0 {
		pick = offline
	}
	switch {
	case len(pick) == 1:
		p, err := protocol.ParsePrincipal(pick[0].Card.ID)
		if err != nil {
			return Target{}, err
		}
		return Target{Principal: p, Name: pick[0].Card.Name, State: pick[0].State()}, nil
	case len(pick) > 1:
		ids := make([]string, len(pick))
		for i, p := range pick {
			ids[i] = p.Card.ID
		}
		return Target{}, fmt.Errorf("%w %q: held by %s; address one by its id", ErrAmbiguousPeer, name, strings.Join(ids, ", "))
	}
	p, err := protocol.ParsePrincipal(name)
	if err != nil {
		p = protocol.Principal{Owner: e.me.Owner, Actor: name}
	}
	if p.Validate() == nil {
		durable, err := e.findDMDurable(ctx, p)
		if err != nil {
			return Target{}, err
		}
		if durable != "" {
			return Target{Principal: p, Name: p.Actor, State: protocol.StatusOffline}, nil
		}
	}
	return Target{}, fmt.Errorf("%w %q: no such name in the roster of space %q and no inbox for it; run `cotal status` to see who is here",
		ErrUnknownPeer, name, e.cfg.Space)
}
