// Package kvlease holds a lease on one key of a JetStream KV bucket whose TTL expires a
// row its holder stopped renewing. A run creates the row atomically, renews it at the
// revision it wrote last, re-checks who holds it when a write fails, and deletes it at
// close only while it is still its own. The delivery daemon (lease.0 of
// cotal_delivery_<space>) and the agent manager (lease.<host> of cotal_manager_<space>)
// both hold theirs with it; each keeps its own row shape.
package kvlease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Lease is one run's hold on Key. Set the exported fields before the first call; a Lease
// holds nothing until Acquire or Recheck wins the row. Its methods are for one goroutine.
type Lease[T fmt.Stringer] struct {
	KV     jetstream.KeyValue
	Key    string
	TTL    time.Duration           // how long a row lives after its last write: the bucket's TTL
	Encode func() []byte           // this run's row, stamped for this write
	Decode func([]byte) (T, error) // reads a row, this run's or another's
	Mine   func(T) bool            // whether a row is this run's
	Gone   func(T) bool            // optional: whether a foreign row's holder is known dead, so its row is taken over at once
	Held   error                   // what Acquire's refusal wraps (errors.Is), such as a package's ErrLeaseHeld
	Now    func() time.Time        // the clock; nil is time.Now
	// Conn, when set, is the connection KV is on: Release then reads the row from the
	// bucket stream's leader, not by Direct Get, which any replica may answer from a copy
	// behind the leader's (on a cluster whose replicas are catching up, a delete at such a
	// revision is refused until the replica catches up).
	Conn *nats.Conn

	rev   uint64       // the revision this run last wrote or adopted
	held  bool         // whether the row is this run's as far as it knows
	wrote time.Time    // when the row was last written: it expires a TTL later at the latest
	wakes atomic.Int64 // how often awaitChange woke: a test's proof that a dead watch does not spin
}

// Reading is what a re-read of the row found.
type Reading int

// What Recheck found.
const (
	Ours    Reading = iota // still this run's: keep serving
	Taken                  // another run holds it: stop for good
	Unknown                // could not tell: stay quiet, ask again later
)

// Holds reports whether the row is this run's as far as this run knows.
func (l *Lease[T]) Holds() bool { return l.held }

// Wrote is when the row this run holds was last written; it expires a TTL later at the
// latest.
func (l *Lease[T]) Wrote() time.Time { return l.wrote }

func (l *Lease[T]) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// wroteAt records a successful write of the row at revision rev.
func (l *Lease[T]) wroteAt(rev uint64) {
	l.rev, l.held, l.wrote = rev, true, l.now()
}

// Acquire creates the row. When another run holds it, a holder that Gone says is dead
// loses its row at once (deleted at its revision); otherwise Acquire fails with an error
// wrapping Held that names the holder, or, with wait set, calls waiting and waits until
// the row changes or is due to expire, and tries again.
func (l *Lease[T]) Acquire(ctx context.Context, wait bool, waiting func(holder T)) error {
	for {
		rev, err := l.KV.Create(ctx, l.Key, l.Encode())
		if err == nil {
			l.wroteAt(rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("create %s: %w", l.Key, err)
		}
		e, err := l.KV.Get(ctx, l.Key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // it expired in between
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", l.Key, err)
		}
		holder, err := l.Decode(e.Value())
		if err != nil {
			return fmt.Errorf("read %s: %w", l.Key, err)
		}
		if l.Gone != nil && l.Gone(holder) {
			if err := l.KV.Delete(ctx, l.Key, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				return fmt.Errorf("take over %s from %s: %w", l.Key, holder, err)
			}
			continue
		}
		if !wait {
			return fmt.Errorf("%w by %s; it expires %s after its holder stops renewing it", l.Held, holder, l.TTL)
		}
		if waiting != nil {
			waiting(holder)
		}
		if err := l.awaitChange(ctx, e); err != nil {
			return err
		}
	}
}

// awaitChange waits until the row e changes or is due to expire (its write time plus the
// TTL, with a little slack for the broker's expiry timer). A watch that ends before then
// (its connection closed) is not read again: the wait goes on until the row's expiry.
func (l *Lease[T]) awaitChange(ctx context.Context, e jetstream.KeyValueEntry) error {
	w, err := l.KV.Watch(ctx, l.Key, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch %s: %w", l.Key, err)
	}
	defer func() { _ = w.Stop() }()
	due := e.Created().Add(l.TTL).Sub(l.now()) + l.TTL/20 + 50*time.Millisecond
	t := time.NewTimer(max(due, 50*time.Millisecond))
	defer t.Stop()
	updates := w.Updates()
	for {
		l.wakes.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case u, ok := <-updates:
			if !ok {
				updates = nil // a closed channel is always ready: never read it again
				continue
			}
			if u != nil && u.Revision() != e.Revision() {
				return nil
			}
		}
	}
}

// Renew rewrites the row at the revision this run wrote last. It fails, wrapping
// jetstream.ErrKeyExists or ErrKeyNotFound, once the row changed under it.
func (l *Lease[T]) Renew(ctx context.Context) error {
	rev, err := l.KV.Update(ctx, l.Key, l.Encode(), l.rev)
	if err != nil {
		return fmt.Errorf("renew %s: %w", l.Key, err)
	}
	l.wroteAt(rev)
	return nil
}

// Recheck decides who holds the row after a failed renewal or a foreign event: this run
// (it adopts the broker's revision), another run (Taken, with the holder), or nobody, in
// which case it re-creates the row atomically and holds it again if that wins. The holder
// is returned with Taken, and with Ours when the row was read rather than re-created.
func (l *Lease[T]) Recheck(ctx context.Context) (Reading, T, error) {
	var none T
	for {
		e, err := l.KV.Get(ctx, l.Key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, cerr := l.KV.Create(ctx, l.Key, l.Encode())
			if cerr == nil {
				l.wroteAt(rev)
				return Ours, none, nil
			}
			if !errors.Is(cerr, jetstream.ErrKeyExists) {
				return Unknown, none, cerr
			}
			continue // another run created it first: read whose it is
		case err != nil:
			return Unknown, none, err
		}
		info, err := l.Decode(e.Value())
		if err != nil {
			return Unknown, none, err
		}
		if !l.Mine(info) {
			l.held = false // never touch a successor's row
			return Taken, info, nil
		}
		l.rev, l.held, l.wrote = e.Revision(), true, e.Created()
		return Ours, info, nil
	}
}

// Release deletes the row only if it is still this run's, at the broker's revision: a
// row another run holds, or one already gone, is left alone.
func (l *Lease[T]) Release(ctx context.Context) error {
	if !l.held {
		return nil
	}
	value, rev, err := l.readForRelease(ctx)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		l.held = false
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", l.Key, err)
	}
	info, err := l.Decode(value)
	if err != nil || !l.Mine(info) {
		l.held = false
		return nil
	}
	if err := l.KV.Delete(ctx, l.Key, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("release %s: %w", l.Key, err)
	}
	l.held = false
	return nil
}

// readForRelease reads the row's value and revision: from the stream leader when Conn is
// set, else through KV. A deleted or absent row is jetstream.ErrKeyNotFound.
func (l *Lease[T]) readForRelease(ctx context.Context) ([]byte, uint64, error) {
	if l.Conn == nil {
		e, err := l.KV.Get(ctx, l.Key)
		if err != nil {
			return nil, 0, err
		}
		return e.Value(), e.Revision(), nil
	}
	subject := "$KV." + l.KV.Bucket() + "." + l.Key
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject}) // a map of strings always encodes
	msg, err := l.Conn.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+l.KV.Bucket(), req)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s from the stream leader: %w", subject, err)
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("read %s from the stream leader: %w", subject, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("read %s from the stream leader: %w", subject, resp.Error)
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("read %s from the stream leader: an answer without a message", subject)
	}
	// A delete or purge leaves a marker whose headers say so: the key is gone.
	if bytes.Contains(resp.Message.Hdrs, []byte("KV-Operation: DEL")) || bytes.Contains(resp.Message.Hdrs, []byte("KV-Operation: PURGE")) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	return resp.Message.Data, resp.Message.Seq, nil
}
