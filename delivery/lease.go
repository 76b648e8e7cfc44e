package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// LeaseInfo is the value of the delivery lease lease.0: who serves the space, in the
// reference's form (DeliveryLeaseInfo: holder, incarnation, since, ready); host and pid
// are Go extensions the reference ignores. Read it with decodeLease, which also reads the
// row of earlier Go releases (the incarnation in "instance").
type LeaseInfo struct {
	Holder   string `json:"holder"`      // the daemon credential's principal, dot-form
	Instance string `json:"incarnation"` // one run of one daemon; only this run may renew or release
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Since    int64  `json:"since"` // unix ms of the row's last write
	Ready    bool   `json:"ready"` // the holder serves
}

// decodeLease reads a lease row leniently: the reference's, or an earlier Go release's.
func decodeLease(b []byte) (LeaseInfo, error) {
	var r struct {
		LeaseInfo
		Old string `json:"instance"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return LeaseInfo{}, err
	}
	if r.Instance == "" {
		r.Instance = r.Old
	}
	return r.LeaseInfo, nil
}

// String names the holder for a person: "instance X (holder, host H, pid P, since T)".
func (i LeaseInfo) String() string {
	return fmt.Sprintf("instance %s (%s on host %s, pid %d, since %s)", i.Instance, i.Holder, i.Host, i.PID,
		time.UnixMilli(i.Since).UTC().Format(time.RFC3339))
}

// ReadLease returns the space's current lease holder; ok is false when nobody holds it.
// The lease may be stale for up to its TTL after its holder died.
func ReadLease(ctx context.Context, js jetstream.JetStream, space string) (LeaseInfo, bool, error) {
	kv, err := js.KeyValue(ctx, protocol.BucketDelivery(space))
	if err != nil {
		return LeaseInfo{}, false, fmt.Errorf("lease bucket of space %q: %w", space, err)
	}
	e, err := kv.Get(ctx, protocol.LeaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LeaseInfo{}, false, nil
	}
	if err != nil {
		return LeaseInfo{}, false, fmt.Errorf("lease of space %q: %w", space, err)
	}
	info, err := decodeLease(e.Value())
	if err != nil {
		return LeaseInfo{}, false, fmt.Errorf("lease of space %q: %w", space, err)
	}
	return info, true, nil
}

// lease is this run's hold on lease.0. Only the run's main loop touches it.
type lease struct {
	kv    jetstream.KeyValue
	ttl   time.Duration
	me    LeaseInfo
	rev   uint64 // the revision this run last wrote; 0 when it holds nothing
	held  bool
	wrote time.Time // when this run last wrote the row: it expires a TTL later at the latest
}

// wroteAt records a successful write of the row at revision rev.
func (l *lease) wroteAt(rev uint64) {
	l.rev, l.held, l.wrote = rev, true, time.Now()
}

func (l *lease) value() []byte {
	l.me.Since = time.Now().UnixMilli() // the reference rewrites since at every write
	b, _ := json.Marshal(l.me)          // a struct of strings and numbers always encodes
	return b
}

// acquire creates the lease atomically. When another run holds it, it fails with
// ErrLeaseHeld naming the holder, or, with wait set, waits until the holder releases it or
// its row expires and tries again.
func (l *lease) acquire(ctx context.Context, wait bool, log func(LeaseInfo)) error {
	for {
		rev, err := l.kv.Create(ctx, protocol.LeaseKey, l.value())
		if err == nil {
			l.wroteAt(rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("create %s: %w", protocol.LeaseKey, err)
		}
		e, err := l.kv.Get(ctx, protocol.LeaseKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // it expired in between
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", protocol.LeaseKey, err)
		}
		holder, err := decodeLease(e.Value())
		if err != nil {
			return fmt.Errorf("read %s: %w", protocol.LeaseKey, err)
		}
		if !wait {
			return fmt.Errorf("%w by %s; it expires %s after its holder stops renewing it", ErrLeaseHeld, holder, l.ttl)
		}
		log(holder)
		if err := l.awaitChange(ctx, e); err != nil {
			return err
		}
	}
}

// awaitChange waits until the row e changes or is due to expire (its write time plus the
// TTL, with a little slack for the broker's expiry timer).
func (l *lease) awaitChange(ctx context.Context, e jetstream.KeyValueEntry) error {
	w, err := l.kv.Watch(ctx, protocol.LeaseKey, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch %s: %w", protocol.LeaseKey, err)
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

// renew rewrites the lease at the revision this run wrote last.
func (l *lease) renew(ctx context.Context) error {
	rev, err := l.kv.Update(ctx, protocol.LeaseKey, l.value(), l.rev)
	if err != nil {
		return err
	}
	l.wroteAt(rev)
	return nil
}

// leaseReading is what a re-read of the lease found.
type leaseReading int

const (
	leaseOurs    leaseReading = iota // still this run's: keep serving
	leaseTaken                       // another run holds it: stop for good
	leaseUnknown                     // could not tell: stay quiet, ask again later
)

// recheck decides who holds the lease after a failed renewal or a foreign event: this run
// (it adopts the broker's revision), another run (taken, with the holder), or nobody, in
// which case it re-creates the row atomically and is the holder again if that wins.
func (l *lease) recheck(ctx context.Context) (leaseReading, LeaseInfo, error) {
	e, err := l.kv.Get(ctx, protocol.LeaseKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, cerr := l.kv.Create(ctx, protocol.LeaseKey, l.value())
		if cerr == nil {
			l.wroteAt(rev)
			return leaseOurs, l.me, nil
		}
		if !errors.Is(cerr, jetstream.ErrKeyExists) {
			return leaseUnknown, LeaseInfo{}, cerr
		}
		return l.recheck(ctx)
	case err != nil:
		return leaseUnknown, LeaseInfo{}, err
	}
	info, err := decodeLease(e.Value())
	if err != nil {
		return leaseUnknown, LeaseInfo{}, err
	}
	if info.Instance != l.me.Instance {
		l.held = false // never touch a successor's row
		return leaseTaken, info, nil
	}
	l.rev, l.held, l.wrote = e.Revision(), true, e.Created()
	return leaseOurs, info, nil
}

// release deletes the lease only if it is still this run's, at the broker's revision.
func (l *lease) release(ctx context.Context) error {
	if !l.held {
		return nil
	}
	e, err := l.kv.Get(ctx, protocol.LeaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	info, err := decodeLease(e.Value())
	if err != nil || info.Instance != l.me.Instance {
		return nil
	}
	if err := l.kv.Delete(ctx, protocol.LeaseKey, jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	l.held = false
	return nil
}

// releaseBound bounds the retries of a lease release the broker refused at close: past it
// (or past the row's expiry, if sooner) the close goes on and the row expires by itself.
const releaseBound = 10 * time.Second

// unwritable reports whether a failed lease write says the bucket cannot be written now,
// rather than that the broker refused this write: no answer within the deadline, no stream
// leader to answer, or JetStream unavailable. On a cluster that lost its quorum every write
// fails so until a peer is back, so a close does not retry it.
func unwritable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		(errors.As(err, &api) && api.Code == 503)
}

// watchLease forwards every change of lease.0 to the main loop.
func (r *run) watchLease(ctx context.Context, wg *sync.WaitGroup) (<-chan jetstream.KeyValueEntry, error) {
	w, err := r.leaseKV.Watch(ctx, protocol.LeaseKey, jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watch the lease: %w", err)
	}
	out := make(chan jetstream.KeyValueEntry, 16)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// releaseRetry is how often a close retries a lease release the broker refused.
const releaseRetry = time.Second

// releaseLease releases the lease as the lane closes. A release the broker refuses is
// retried every releaseRetry until it succeeds, the connection is lost, releaseBound has
// passed, or the row has expired by itself (a TTL after this run last wrote it): until
// then the lane has not confirmed its close, and a host holds its manifest acknowledgment
// back. A release that finds the bucket unwritable (no answer, no stream leader: a cluster
// without quorum) is not retried: the row expires by itself, and the close goes on.
func (r *run) releaseLease(ctx context.Context) {
	end := time.Now().Add(releaseBound)
	for {
		rctx, cancel := context.WithTimeout(ctx, r.opTimeout)
		err := r.lease.release(rctx)
		cancel()
		if err == nil {
			return
		}
		expires := r.lease.wrote.Add(r.lease.ttl)
		if !r.nc.IsConnected() || unwritable(err) || !time.Now().Before(expires) || !time.Now().Before(end) {
			r.log.Warn("lease not released; it expires by itself", "err", err, "expires", expires)
			return
		}
		r.log.Warn("lease not released; retrying before the close is confirmed", "err", err, "expires", expires)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(releaseRetry, time.Until(expires), time.Until(end))):
		}
	}
}

// acquire takes the lease; while it waits for a held one, a broker gone for BrokerGone
// ends the wait with ErrBrokerGone.
func (r *run) acquire(ctx context.Context) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var gone <-chan time.Time
		for {
			select {
			case <-actx.Done():
				return
			case <-gone:
				cancel(fmt.Errorf("%w for %s (broker at %s unreachable) while waiting for the lease", ErrBrokerGone, r.cfg.BrokerGone, r.cfg.Server))
				return
			case <-r.connSig:
				r.connMu.Lock()
				up := r.connUp
				r.connMu.Unlock()
				if up {
					gone = nil
				} else if gone == nil {
					gone = time.After(r.cfg.BrokerGone)
				}
			}
		}
	}()
	err := r.lease.acquire(actx, r.cfg.WaitForLease, func(h LeaseInfo) {
		r.log.Info("waiting for the lease", "holder", h.String())
	})
	cancel(nil)
	<-watched
	if cause := context.Cause(actx); errors.Is(cause, ErrBrokerGone) {
		return cause
	}
	if !r.nc.IsConnected() { // a state change the watcher consumed: tell the main loop
		select {
		case r.connSig <- struct{}{}:
		default:
		}
	}
	return err
}
