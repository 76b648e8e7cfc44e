package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// ErrLeaseHeld is returned by Run when another manager holds this host's lease of the
// space.
var ErrLeaseHeld = errors.New("the manager lease of this space and host is held")

// LeaseInfo is a manager lease row, lease.<host> in cotal_manager_<space>.
type LeaseInfo struct {
	Instance string `json:"instance"` // one run of one manager
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Start    string `json:"start,omitempty"` // the process start time (pid reuse guard)
	Since    int64  `json:"since"`           // unix ms of the row's last write
}

// String names the holder for a person.
func (i LeaseInfo) String() string {
	return fmt.Sprintf("manager %s (host %s, pid %d, since %s)", i.Instance, i.Host, i.PID,
		time.UnixMilli(i.Since).UTC().Format(time.RFC3339))
}

// lease is one run's hold on its host's row.
type lease struct {
	kv  jetstream.KeyValue
	key string
	ttl time.Duration
	me  LeaseInfo
	rev uint64
}

func (l *lease) value() []byte {
	l.me.Since = time.Now().UnixMilli()
	b, _ := json.Marshal(l.me) // strings and numbers always encode
	return b
}

// acquire creates the row. A row of a process on this host that is gone (a manager
// killed by SIGKILL) is taken over at once; a live holder's row is refused with
// ErrLeaseHeld naming it, or with wait, waited out until it is released or expires.
func (l *lease) acquire(ctx context.Context, wait bool, waiting func(LeaseInfo)) error {
	for {
		rev, err := l.kv.Create(ctx, l.key, l.value())
		if err == nil {
			l.rev = rev
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("create %s: %w", l.key, err)
		}
		e, err := l.kv.Get(ctx, l.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", l.key, err)
		}
		var holder LeaseInfo
		if err := json.Unmarshal(e.Value(), &holder); err != nil {
			return fmt.Errorf("read %s: %w", l.key, err)
		}
		if holder.Host == l.me.Host && holder.PID > 0 && holder.Start != "" {
			if alive, aerr := (workspace.Record{PID: holder.PID, Start: holder.Start}).Alive(); aerr == nil && !alive {
				// Its holder is gone: take the row over at its revision.
				if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
					return fmt.Errorf("take over %s from %s: %w", l.key, holder, err)
				}
				continue
			}
		}
		if !wait {
			return fmt.Errorf("%w by %s; it expires %s after its holder stops renewing it", ErrLeaseHeld, holder, l.ttl)
		}
		waiting(holder)
		if err := l.awaitChange(ctx, e); err != nil {
			return err
		}
	}
}

// awaitChange waits until the row e changes or is due to expire.
func (l *lease) awaitChange(ctx context.Context, e jetstream.KeyValueEntry) error {
	w, err := l.kv.Watch(ctx, l.key, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch %s: %w", l.key, err)
	}
	defer func() { _ = w.Stop() }()
	due := time.Until(e.Created().Add(l.ttl)) + l.ttl/20 + 50*time.Millisecond
	t := time.NewTimer(max(due, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case u := <-w.Updates():
			if u != nil && u.Revision() != e.Revision() {
				return nil
			}
		}
	}
}

// renew rewrites the row at the revision this run wrote last; it fails once another run
// holds it.
func (l *lease) renew(ctx context.Context) error {
	rev, err := l.kv.Update(ctx, l.key, l.value(), l.rev)
	if err != nil {
		return fmt.Errorf("renew %s: %w", l.key, err)
	}
	l.rev = rev
	return nil
}

// release deletes the row if it is still this run's.
func (l *lease) release(ctx context.Context) error {
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("release %s: %w", l.key, err)
	}
	return nil
}

// ReadLease returns the manager lease row of host in space; ok is false when none.
func ReadLease(ctx context.Context, js jetstream.JetStream, space, host string) (LeaseInfo, bool, error) {
	kv, err := js.KeyValue(ctx, protocol.BucketManager(space))
	if err != nil {
		return LeaseInfo{}, false, fmt.Errorf("manager lease bucket of space %q: %w", space, err)
	}
	e, err := kv.Get(ctx, protocol.ManagerLeaseKey(host))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LeaseInfo{}, false, nil
	}
	if err != nil {
		return LeaseInfo{}, false, err
	}
	var info LeaseInfo
	if err := json.Unmarshal(e.Value(), &info); err != nil {
		return LeaseInfo{}, false, err
	}
	return info, true, nil
}
