package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/kvlease"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// ErrLeaseHeld is returned by Run when another manager holds this host's lease of the
// space.
var ErrLeaseHeld = errors.New("the manager lease of this space and host is held")

// LeaseInfo is a manager lease row, lease.<instanceId> in cotal_manager_<space>, in the
// reference's form (packages/core/src/lease.ts ManagerLeaseInfo: holder, instanceId,
// runtime, root, pid, since) with three fields of Go's after them: the run that wrote it
// (which of two runs of one instance holds it), the host, and the process start time (the
// pid reuse guard). A reference reader ignores them.
type LeaseInfo struct {
	Holder     string `json:"holder"`     // the manager's principal, <owner>.<actor>
	InstanceID string `json:"instanceId"` // InstanceID(host): the row's key
	Runtime    string `json:"runtime"`    // how seats run: pty
	Root       string `json:"root"`       // the project root
	PID        int    `json:"pid"`
	Since      int64  `json:"since"` // unix ms of the row's last write

	Run   string `json:"run,omitempty"`   // one run of one manager
	Host  string `json:"host,omitempty"`  // the host it runs on
	Start string `json:"start,omitempty"` // the process start time (pid reuse guard)
}

// String names the holder for a person.
func (i LeaseInfo) String() string {
	return fmt.Sprintf("manager %s (host %s, pid %d, since %s)", i.InstanceID, i.Host, i.PID,
		time.UnixMilli(i.Since).UTC().Format(time.RFC3339))
}

// legacyLease is the row an older Go manager wrote, lease.<host>: still honoured (a live
// holder keeps the host's lease) and cleared once its holder is gone.
type legacyLease struct {
	Instance string `json:"instance"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Start    string `json:"start,omitempty"`
	Since    int64  `json:"since"`
}

func (i legacyLease) String() string {
	return fmt.Sprintf("manager %s of an older cotal (host %s, pid %d, since %s)", i.Instance, i.Host, i.PID,
		time.UnixMilli(i.Since).UTC().Format(time.RFC3339))
}

// LeaseKey is the manager lease row of the manager with instance id instance.
func LeaseKey(instance string) string { return "lease." + instance }

// legacyLeaseKey is the row an older Go manager of host wrote.
func legacyLeaseKey(host string) string { return protocol.ManagerLeaseKey(host) }

// lease is one run's hold on its host's row, a kvlease.Lease over the manager row.
type lease struct {
	kv   jetstream.KeyValue
	key  string
	ttl  time.Duration
	me   LeaseInfo
	hold kvlease.Lease[LeaseInfo] // bound to the fields above at each call
}

// gone reports whether a row's holder is a process of this host that is known dead.
func gone(host, rowHost string, pid int, start string) bool {
	if rowHost != host || pid <= 0 || start == "" {
		return false
	}
	alive, err := (workspace.Record{PID: pid, Start: start}).Alive()
	return err == nil && !alive
}

// bound is the shared lease, told this run's bucket, key, TTL and row. A row of a process
// on this host that is gone (a manager killed by SIGKILL) is taken over at once.
func (l *lease) bound() *kvlease.Lease[LeaseInfo] {
	h := &l.hold
	h.KV, h.Key, h.TTL, h.Held = l.kv, l.key, l.ttl, ErrLeaseHeld
	h.Encode = l.value
	h.Decode = decodeLease
	h.Mine = func(i LeaseInfo) bool { return i.Run == l.me.Run }
	h.Gone = func(i LeaseInfo) bool { return gone(l.me.Host, i.Host, i.PID, i.Start) }
	return h
}

func decodeLease(b []byte) (LeaseInfo, error) {
	var i LeaseInfo
	err := json.Unmarshal(b, &i)
	return i, err
}

func (l *lease) value() []byte {
	l.me.Since = time.Now().UnixMilli()
	b, _ := json.Marshal(l.me) // strings and numbers always encode
	return b
}

// acquire creates the row. A row of a process on this host that is gone is taken over at
// once; a live holder's row is refused with ErrLeaseHeld naming it, or with wait, waited
// out until it is released or expires. An older Go manager's row of this host
// (lease.<host>) counts as a holder too, and is deleted once its holder is gone.
func (l *lease) acquire(ctx context.Context, wait bool, waiting func(fmt.Stringer)) error {
	if err := l.clearLegacy(ctx, wait, waiting); err != nil {
		return err
	}
	return l.bound().Acquire(ctx, wait, func(h LeaseInfo) {
		if waiting != nil {
			waiting(h)
		}
	})
}

// clearLegacy waits out or refuses a live older manager's row of this host, and deletes
// the row of one that is gone.
func (l *lease) clearLegacy(ctx context.Context, wait bool, waiting func(fmt.Stringer)) error {
	key := legacyLeaseKey(l.me.Host)
	for {
		e, err := l.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		var old legacyLease
		if err := json.Unmarshal(e.Value(), &old); err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if gone(l.me.Host, old.Host, old.PID, old.Start) {
			if err := l.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return fmt.Errorf("clear %s of %s: %w", key, old, err)
			}
			continue
		}
		if !wait {
			return fmt.Errorf("%w by %s; it expires %s after its holder stops renewing it", ErrLeaseHeld, old, l.ttl)
		}
		if waiting != nil {
			waiting(old)
		}
		if err := awaitKeyChange(ctx, l.kv, key, e.Revision(), time.UnixMilli(old.Since).Add(l.ttl+time.Second)); err != nil {
			return err
		}
	}
}

// awaitKeyChange waits until key changes past rev, or until due (the row's expiry).
func awaitKeyChange(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, due time.Time) error {
	w, err := kv.Watch(ctx, key, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch %s: %w", key, err)
	}
	defer func() { _ = w.Stop() }()
	timer := time.NewTimer(max(time.Until(due), 0))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					return nil
				}
			}
			if e != nil && e.Revision() > rev {
				return nil
			}
		}
	}
}

// renew rewrites the row at the revision this run wrote last; it fails once another run
// holds it.
func (l *lease) renew(ctx context.Context) error { return l.bound().Renew(ctx) }

// release deletes the row if it is still this run's.
func (l *lease) release(ctx context.Context) error { return l.bound().Release(ctx) }

// ReadLease returns the manager lease row of host in space, the current form or an older
// manager's; ok is false when none.
func ReadLease(ctx context.Context, js jetstream.JetStream, space, host string) (LeaseInfo, bool, error) {
	kv, err := js.KeyValue(ctx, protocol.BucketManager(space))
	if err != nil {
		return LeaseInfo{}, false, fmt.Errorf("manager lease bucket of space %q: %w", space, err)
	}
	e, err := kv.Get(ctx, LeaseKey(InstanceID(host)))
	if err == nil {
		info, err := decodeLease(e.Value())
		return info, err == nil, err
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return LeaseInfo{}, false, err
	}
	e, err = kv.Get(ctx, legacyLeaseKey(host))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LeaseInfo{}, false, nil
	}
	if err != nil {
		return LeaseInfo{}, false, err
	}
	var old legacyLease
	if err := json.Unmarshal(e.Value(), &old); err != nil {
		return LeaseInfo{}, false, err
	}
	return LeaseInfo{InstanceID: old.Instance, Run: old.Instance, Host: old.Host, PID: old.PID, Start: old.Start, Since: old.Since}, true, nil
}
