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

	"github.com/cotal-ai/cotal/kvlease"
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
	// Version is the holder's build (cotal's version): a Go extension a reference reader
	// ignores (docs/interop.md); empty in a row the reference or an older Go wrote.
	Version string `json:"version,omitempty"`
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

// lease is this run's hold on lease.0, a kvlease.Lease over the delivery row. Only the
// run's main loop touches it.
type lease struct {
	kv   jetstream.KeyValue
	conn *nats.Conn // kv's connection: a release reads the row from the stream leader
	ttl  time.Duration
	me   LeaseInfo
	hold kvlease.Lease[LeaseInfo] // bound to the fields above at each call
}

// leaseReading is what a re-read of the lease found.
type leaseReading = kvlease.Reading

const (
	leaseOurs    = kvlease.Ours    // still this run's: keep serving
	leaseTaken   = kvlease.Taken   // another run holds it: stop for good
	leaseUnknown = kvlease.Unknown // could not tell: stay quiet, ask again later
)

// bound is the shared lease, told this run's bucket, TTL and row.
func (l *lease) bound() *kvlease.Lease[LeaseInfo] {
	h := &l.hold
	h.KV, h.Conn, h.Key, h.TTL, h.Held = l.kv, l.conn, protocol.LeaseKey, l.ttl, ErrLeaseHeld
	h.Encode, h.Decode = l.value, decodeLease
	h.Mine = func(i LeaseInfo) bool { return i.Instance == l.me.Instance }
	return h
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
	return l.bound().Acquire(ctx, wait, log)
}

// renew rewrites the lease at the revision this run wrote last.
func (l *lease) renew(ctx context.Context) error { return l.bound().Renew(ctx) }

// recheck decides who holds the lease after a failed renewal or a foreign event: this run
// (it adopts the broker's revision), another run (taken, with the holder), or nobody, in
// which case it re-creates the row atomically and is the holder again if that wins.
func (l *lease) recheck(ctx context.Context) (leaseReading, LeaseInfo, error) {
	return l.bound().Recheck(ctx)
}

// release deletes the lease only if it is still this run's, at the broker's revision.
func (l *lease) release(ctx context.Context) error { return l.bound().Release(ctx) }

// wrote is when this run last wrote the row: it expires a TTL later at the latest.
func (l *lease) wrote() time.Time { return l.hold.Wrote() }

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
// without quorum) is not retried, nor one refused twice for a revision the row no longer
// has (on a cluster re-electing after a node's crash the leader's read can lag the
// write it refuses): the row expires by itself, and the close goes on.
func (r *run) releaseLease(ctx context.Context) {
	end := time.Now().Add(releaseBound)
	mismatches := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, r.opTimeout)
		err := r.lease.release(rctx)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			mismatches++
		}
		expires := r.lease.wrote().Add(r.lease.ttl)
		if !r.nc.IsConnected() || unwritable(err) || mismatches >= 2 || !time.Now().Before(expires) || !time.Now().Before(end) {
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
