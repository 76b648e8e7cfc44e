package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// Peer is one roster entry: the last presence record of a principal and whether it is
// online now (fresh and not offline).
type Peer struct {
	protocol.Presence
	Online bool
}

// State is the status to show for the peer: its own status while online, else offline.
func (p Peer) State() protocol.Status {
	if p.Online {
		return p.Status
	}
	return protocol.StatusOffline
}

func (e *Endpoint) presenceBucket(ctx context.Context) (jetstream.KeyValue, error) {
	e.mu.Lock()
	kv := e.presence
	e.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := e.js.KeyValue(ctx, protocol.BucketPresence(e.cfg.Space))
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("%w: space %q has no presence bucket on %s for this credential: the space is not served to it; `cotal up --space %s` adds a space",
				ErrNotProvisioned, e.cfg.Space, e.nc.ConnectedUrlRedacted(), e.cfg.Space)
		}
		return nil, fmt.Errorf("presence bucket: %w", e.refused(err))
	}
	e.mu.Lock()
	e.presence = kv
	e.mu.Unlock()
	return kv, nil
}

// record builds this endpoint's presence record with status st at now.
func (e *Endpoint) record(st protocol.Status, now time.Time) protocol.Presence {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := protocol.Presence{
		Card: e.Card(), Status: st, TS: now.UnixMilli(), LifecycleUID: e.uid,
		Activity: e.activity, ActiveAt: now.UnixMilli(),
	}
	if st != protocol.StatusOffline {
		p.StatusSince = e.since
	}
	if e.activity != "" {
		p.ActivitySince = e.actSince
	}
	return p
}

func (e *Endpoint) writePresence(ctx context.Context, st protocol.Status) error {
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(e.record(st, time.Now()))
	if err != nil {
		return fmt.Errorf("encode presence: %w", err)
	}
	if _, err := kv.Put(ctx, e.me.String(), b); err != nil {
		return fmt.Errorf("write presence %s: %w", e.me, err)
	}
	return nil
}

// heartbeat rewrites the presence record every interval until ctx ends.
func (e *Endpoint) heartbeat(ctx context.Context) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	failingSince := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !e.nc.IsConnected() {
			failingSince = time.Time{} // a lost server is reported once, by ConnEvents
			continue
		}
		e.mu.Lock()
		st := e.status
		e.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, e.cfg.Heartbeat)
		err := e.writePresence(wctx, st)
		cancel()
		switch {
		case err == nil:
			failingSince = time.Time{}
		case failingSince.IsZero():
			failingSince = time.Now()
			e.log.Warn("presence write failed", "err", err)
		case time.Since(failingSince) > protocol.LivenessWindow:
			e.log.Error("presence-write-stuck", "since", failingSince, "err", err)
		}
	}
}

// SetStatus changes this endpoint's status and publishes it at once. Offline is refused:
// a live endpoint never claims to be offline; Close says that.
func (e *Endpoint) SetStatus(ctx context.Context, st protocol.Status) error {
	if !st.Valid() || st == protocol.StatusOffline {
		return fmt.Errorf("status %q: want idle, waiting or working", st)
	}
	e.mu.Lock()
	if e.status != st {
		e.status, e.since = st, time.Now().UnixMilli()
	}
	joined := e.joined
	e.mu.Unlock()
	if !joined {
		return nil
	}
	return e.writePresence(ctx, st)
}

// SetActivity sets the free-text description of current work and publishes it at once.
func (e *Endpoint) SetActivity(ctx context.Context, activity string) error {
	e.mu.Lock()
	if e.activity != activity {
		e.activity, e.actSince = activity, time.Now().UnixMilli()
	}
	st, joined := e.status, e.joined
	e.mu.Unlock()
	if !joined {
		return nil
	}
	return e.writePresence(ctx, st)
}

// Roster reads every presence record of the space, sorted by name then id. Records whose
// card id differs from their key are dropped and logged.
func (e *Endpoint) Roster(ctx context.Context) ([]Peer, error) {
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	now := time.Now()
	var peers []Peer
	for key := range keys.Keys() {
		entry, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired between list and get
		}
		if err != nil {
			return nil, fmt.Errorf("roster: %s: %w", key, err)
		}
		if p, ok := e.decodePeer(entry, now); ok {
			peers = append(peers, p)
		}
	}
	sortPeers(peers)
	return peers, nil
}

func (e *Endpoint) decodePeer(entry jetstream.KeyValueEntry, now time.Time) (Peer, bool) {
	p, err := protocol.DecodePresence(entry.Key(), entry.Value())
	if err != nil {
		e.log.Warn("presence record dropped", "key", entry.Key(), "err", err)
		return Peer{}, false
	}
	return Peer{Presence: p, Online: p.Live(now)}, true
}

func sortPeers(peers []Peer) {
	sort.Slice(peers, func(i, j int) bool {
		a, b := strings.ToLower(peers[i].Card.Name), strings.ToLower(peers[j].Card.Name)
		if a != b {
			return a < b
		}
		return peers[i].Card.ID < peers[j].Card.ID
	})
}

// PeerChange is a change in one peer's effective state seen by WatchPresence.
type PeerChange struct {
	Peer
	Previous protocol.Status // "" when the peer is new to this watch
}

// WatchPresence reports every change of a peer's effective state (joined, status
// changed, went offline by record, by deletion or by silence past the liveness window)
// until ctx ends, when the channel closes.
func (e *Endpoint) WatchPresence(ctx context.Context) (<-chan PeerChange, error) {
	kv, err := e.presenceBucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch presence: %w", err)
	}
	out := make(chan PeerChange, 64)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }() // ctx is over; nothing to report to
		known := map[string]Peer{}
		emit := func(p Peer) bool {
			old, had := known[p.Card.ID]
			known[p.Card.ID] = p
			if had && old.State() == p.State() && old.Activity == p.Activity {
				return true
			}
			ch := PeerChange{Peer: p}
			if had {
				ch.Previous = old.State()
			}
			select {
			case out <- ch:
				return true
			case <-ctx.Done():
				return false
			}
		}
		sweep := time.NewTicker(time.Second)
		defer sweep.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case entry, ok := <-w.Updates():
				if !ok {
					return
				}
				if entry == nil {
					continue // end of the initial snapshot
				}
				if entry.Operation() != jetstream.KeyValuePut {
					if old, had := known[entry.Key()]; had {
						old.Online = false
						if !emit(old) {
							return
						}
					}
					continue
				}
				if p, ok := e.decodePeer(entry, time.Now()); ok && !emit(p) {
					return
				}
			case now := <-sweep.C:
				for _, p := range known {
					if p.Online && !p.Live(now) {
						p.Online = false
						if !emit(p) {
							return
						}
					}
				}
			}
		}
	}()
	return out, nil
}
