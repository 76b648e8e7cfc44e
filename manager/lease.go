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

// lease is one run's hold on its host's row, a kvlease.Lease over the manager row.
type lease struct {
	kv   jetstream.KeyValue
	key  string
	ttl  time.Duration
	me   LeaseInfo
	hold kvlease.Lease[LeaseInfo] // bound to the fields above at each call
}

// bound is the shared lease, told this run's bucket, key, TTL and row. A row of a process
// on this host that is gone (a manager killed by SIGKILL) is taken over at once.
func (l *lease) bound() *kvlease.Lease[LeaseInfo] {
	h := &l.hold
	h.KV, h.Key, h.TTL, h.Held = l.kv, l.key, l.ttl, ErrLeaseHeld
	h.Encode = l.value
	h.Decode = func(b []byte) (LeaseInfo, error) {
		var i LeaseInfo
		err := json.Unmarshal(b, &i)
		return i, err
	}
	h.Mine = func(i LeaseInfo) bool { return i.Instance == l.me.Instance }
	h.Gone = func(i LeaseInfo) bool {
		if i.Host != l.me.Host || i.PID <= 0 || i.Start == "" {
			return false
		}
		alive, err := (workspace.Record{PID: i.PID, Start: i.Start}).Alive()
		return err == nil && !alive
	}
	return h
}

func (l *lease) value() []byte {
	l.me.Since = time.Now().UnixMilli()
	b, _ := json.Marshal(l.me) // strings and numbers always encode
	return b
}

// acquire creates the row. A row of a process on this host that is gone is taken over at
// once; a live holder's row is refused with ErrLeaseHeld naming it, or with wait, waited
// out until it is released or expires.
func (l *lease) acquire(ctx context.Context, wait bool, waiting func(LeaseInfo)) error {
	return l.bound().Acquire(ctx, wait, waiting)
}

// renew rewrites the row at the revision this run wrote last; it fails once another run
// holds it.
func (l *lease) renew(ctx context.Context) error { return l.bound().Renew(ctx) }

// release deletes the row if it is still this run's.
func (l *lease) release(ctx context.Context) error { return l.bound().Release(ctx) }

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
