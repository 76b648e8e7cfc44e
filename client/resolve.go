package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// ErrUnknownPeer reports a name that is neither in the roster nor has a DM durable.
var ErrUnknownPeer = errors.New("unknown peer")

// ErrAmbiguousPeer reports a name held by more than one online peer.
var ErrAmbiguousPeer = errors.New("ambiguous peer")

// ErrNoInbox reports a DM recipient with no inbox on the space: it never joined, and no
// inbox was provisioned for it, so a DM sent now would never be read.
var ErrNoInbox = errors.New("no inbox")

// maxKnownInboxes bounds the endpoint's memory of recipients whose inbox it has seen.
const maxKnownInboxes = 4096

// checkInbox confirms that p has an inbox a DM is kept in: this endpoint itself, a
// principal seen with an inbox before, one with a presence record (it joined, binding its
// inbox), or one with a DM durable. On an authenticated connection inboxes are provisioned
// with the credential and an agent may not list them, so only a principal with neither a
// presence record nor a credential escapes the check there (see docs/interop.md).
func (e *Endpoint) checkInbox(ctx context.Context, p protocol.Principal) error {
	key := p.String()
	if p == e.me {
		return nil
	}
	e.mu.Lock()
	_, known := e.inboxes[key]
	e.mu.Unlock()
	if known {
		return nil
	}
	found := false
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return err
	}
	entry, err := kv.Get(ctx, key)
	switch {
	case err == nil && entry.Operation() == jetstream.KeyValuePut:
		found = true
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("presence of %s: %w", key, e.refused(err))
	}
	if !found && (e.nc.Opts.UserJWT != nil || e.cfg.Callout) {
		return nil // provisioned with the credential; this credential may not list inboxes
	}
	if !found {
		name, err := e.findDMDurable(ctx, p)
		if err != nil {
			return err
		}
		if name == "" {
			return fmt.Errorf("%w: %s never joined space %q and has no inbox there, so it would never read this message; nothing was sent. Send it once %s has joined (`cotal status` shows who is here)",
				ErrNoInbox, key, e.cfg.Space, p.Actor)
		}
	}
	e.mu.Lock()
	if len(e.inboxes) >= maxKnownInboxes {
		clear(e.inboxes)
	}
	e.inboxes[key] = struct{}{}
	e.mu.Unlock()
	return nil
}

// Target is a resolved DM recipient and its state at resolution time.
type Target struct {
	Principal protocol.Principal
	Name      string
	State     protocol.Status // offline when only its DM durable is known
}

// Resolve finds the peer a person means by name (case-insensitive display name, or a
// dot-form principal). A principal is matched by id before any display name, so a peer
// cannot take another's id as its name: the roster entry with that id, else its inbox.
// Otherwise a peer in the roster wins by name, online ones first; one that left but whose
// DM durable exists on this space resolves as offline, so a DM waits for it.
func (e *Endpoint) Resolve(ctx context.Context, name string) (Target, error) {
	peers, err := e.Roster(ctx)
	if err != nil {
		return Target{}, err
	}
	for _, p := range peers {
		if p.Card.ID == name {
			return peerTarget(p)
		}
	}
	offline := func(p protocol.Principal) (Target, bool, error) {
		if p.Validate() != nil {
			return Target{}, false, nil
		}
		durable, err := e.findDMDurable(ctx, p)
		if err != nil || durable == "" {
			return Target{}, false, err
		}
		return Target{Principal: p, Name: p.Actor, State: protocol.StatusOffline}, true, nil
	}
	byID, idErr := protocol.ParsePrincipal(name)
	if idErr == nil {
		if t, ok, err := offline(byID); ok || err != nil {
			return t, err
		}
	}
	var online, gone []Peer
	for _, p := range peers {
		if strings.EqualFold(p.Card.Name, name) {
			if p.Online {
				online = append(online, p)
			} else {
				gone = append(gone, p)
			}
		}
	}
	pick := online
	if len(pick) == 0 {
		pick = gone
	}
	switch {
	case len(pick) == 1:
		return peerTarget(pick[0])
	case len(pick) > 1:
		ids := make([]string, len(pick))
		for i, p := range pick {
			ids[i] = p.Card.ID
		}
		return Target{}, fmt.Errorf("%w %q: held by %s; address one by its id", ErrAmbiguousPeer, name, strings.Join(ids, ", "))
	}
	if idErr != nil {
		if t, ok, err := offline(protocol.Principal{Owner: e.me.Owner, Actor: name}); ok || err != nil {
			return t, err
		}
	}
	return Target{}, fmt.Errorf("%w %q: no such name in the roster of space %q and no inbox for it; run `cotal status` to see who is here",
		ErrUnknownPeer, name, e.cfg.Space)
}

// peerTarget is the Target of a roster entry.
func peerTarget(p Peer) (Target, error) {
	pr, err := protocol.ParsePrincipal(p.Card.ID)
	if err != nil {
		return Target{}, err
	}
	return Target{Principal: pr, Name: p.Card.Name, State: p.State()}, nil
}
