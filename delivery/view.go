package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// view keeps one KV bucket in memory through a watch, decoded, and builds an immutable
// snapshot S of it on demand. sync makes it fresh: it returns once every write the bucket
// held when sync was called has been applied, so a decision made on the next snapshot
// reads the bucket as of that moment (as a read per entry would).
type view[T, S any] struct {
	bucket string
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	decode func([]byte) (T, error)
	build  func(map[string]T) S
	log    *slog.Logger

	mu     sync.Mutex
	rows   map[string]viewRow[T]
	pos    uint64        // the watch's position: the last bucket stream sequence it applied
	moved  chan struct{} // closed and replaced each time pos advances
	snap   S
	fresh  bool          // snap reflects rows
	reopen chan struct{} // asks the watch loop to start over
}

type viewRow[T any] struct {
	val     T
	rev     uint64
	deleted bool
}

func newView[T, S any](js jetstream.JetStream, kv jetstream.KeyValue, bucket string, decode func([]byte) (T, error), build func(map[string]T) S, log *slog.Logger) *view[T, S] {
	return &view[T, S]{
		bucket: bucket, js: js, kv: kv, decode: decode, build: build, log: log,
		rows: map[string]viewRow[T]{}, moved: make(chan struct{}), reopen: make(chan struct{}, 1),
	}
}

// run keeps the view current until ctx ends. loaded is closed once the first full load
// has been applied.
func (v *view[T, S]) run(ctx context.Context, loaded chan<- struct{}) error {
	first := true
	for {
		err := v.watch(ctx, func() {
			if first {
				first = false
				close(loaded)
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		v.log.Warn("bucket watch restarts", "bucket", v.bucket, "err", err)
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watch runs one watch of the whole bucket; it returns when ctx ends, the watch ends, or a
// reopen is asked for.
func (v *view[T, S]) watch(ctx context.Context, loaded func()) error {
	st, err := v.js.Stream(ctx, "KV_"+v.bucket)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", v.bucket, err)
	}
	floor := st.CachedInfo().State.LastSeq
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := v.kv.WatchAll(wctx)
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", v.bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.reopen:
			return errors.New("fell behind its bucket")
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch ended")
			}
			if e == nil { // the initial values are in: the view holds the bucket as of floor
				v.advance(floor)
				loaded()
				continue
			}
			v.apply(e.Key(), e.Value(), e.Revision(), e.Operation() != jetstream.KeyValuePut)
			v.advance(e.Revision())
		}
	}
}

// apply records one write, unless the view already holds a newer one for the key.
func (v *view[T, S]) apply(key string, value []byte, rev uint64, deleted bool) {
	row := viewRow[T]{rev: rev, deleted: deleted}
	if !deleted {
		val, err := v.decode(value)
		if err != nil {
			v.log.Warn("bucket entry ignored", "bucket", v.bucket, "key", key, "err", err)
			row.deleted = true
		}
		row.val = val
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.rows[key]; ok && old.rev >= rev {
		return
	}
	v.rows[key] = row
	v.fresh = false
}

// put records a write this daemon made itself, at once. It does not move the watch's
// position: a write by someone else stored before it may still be on its way.
func (v *view[T, S]) put(key string, val T, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.rows[key]; ok && old.rev >= rev {
		return
	}
	v.rows[key] = viewRow[T]{val: val, rev: rev}
	v.fresh = false
}

func (v *view[T, S]) advance(pos uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if pos > v.pos {
		v.pos = pos
		close(v.moved)
		v.moved = make(chan struct{})
	}
}

// sync returns once the view has applied every write the bucket holds now. If the watch
// does not get there within wait, it asks the watch to start over and fails.
func (v *view[T, S]) sync(ctx context.Context, wait time.Duration) error {
	st, err := v.js.Stream(ctx, "KV_"+v.bucket)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", v.bucket, err)
	}
	want := st.CachedInfo().State.LastSeq
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		v.mu.Lock()
		pos, moved := v.pos, v.moved
		v.mu.Unlock()
		if pos >= want {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			select {
			case v.reopen <- struct{}{}:
			default:
			}
			return fmt.Errorf("bucket %s: the watch is at %d, the bucket at %d", v.bucket, pos, want)
		}
	}
}

// row returns the entry the view holds for key and its revision, if it holds a
// readable, undeleted one. It may be behind the bucket: a caller that writes must compare
// and set against the revision.
func (v *view[T, S]) row(key string) (T, uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.rows[key]
	if !ok || r.deleted {
		var zero T
		return zero, 0, false
	}
	return r.val, r.rev, true
}

// snapshot returns the view's snapshot, rebuilding it when a write came in since.
func (v *view[T, S]) snapshot() S {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.fresh {
		live := make(map[string]T, len(v.rows))
		for k, r := range v.rows {
			if !r.deleted {
				live[k] = r.val
			}
		}
		v.snap = v.build(live)
		v.fresh = true
	}
	return v.snap
}
