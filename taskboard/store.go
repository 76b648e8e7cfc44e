package taskboard

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// Board is one principal's handle on a space's task board. Its methods are safe for
// concurrent use.
type Board struct {
	nc     *nats.Conn
	kv     jetstream.KeyValue
	bucket string
	me     protocol.Principal
	now    func() time.Time
	lease  time.Duration
}

// Options tunes a Board.
type Options struct {
	Now   func() time.Time // the clock rows are stamped and judged by; nil is time.Now
	Lease time.Duration    // 0 is Lease
}

// Connect binds the space's board bucket as me, over nc. The bucket must exist (provision
// makes it).
func Connect(ctx context.Context, nc *nats.Conn, space string, me protocol.Principal, opts Options) (*Board, error) {
	if err := me.Validate(); err != nil {
		return nil, fmt.Errorf("task board: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("task board: %w", err)
	}
	kv, err := js.KeyValue(ctx, Bucket(space))
	if err != nil {
		return nil, fmt.Errorf("task board %s: %w (run `cotal up` to provision it)", Bucket(space), err)
	}
	b := &Board{nc: nc, kv: kv, bucket: Bucket(space), me: me, now: opts.Now, lease: opts.Lease}
	if b.now == nil {
		b.now = time.Now
	}
	if b.lease == 0 {
		b.lease = Lease
	}
	return b, nil
}

// Me is the principal the board writes as.
func (b *Board) Me() protocol.Principal { return b.me }

// List returns every task, folded at the board's clock.
func (b *Board) List(ctx context.Context) ([]Task, error) {
	rows, err := b.scan(ctx, ">")
	if err != nil {
		return nil, err
	}
	return Fold(rows, b.now(), b.lease), nil
}

// Get returns one task.
func (b *Board) Get(ctx context.Context, id string) (Task, error) {
	if !ValidID(id) {
		return Task{}, fmt.Errorf("%w: task id %q: want 1 to 32 of a-z 0-9", ErrBadInput, id)
	}
	rows, err := b.scan(ctx, "*."+id+".>") // only this task's rows
	if err != nil {
		return Task{}, err
	}
	for _, t := range Fold(rows, b.now(), b.lease) {
		if t.ID == id {
			return t, nil
		}
	}
	return Task{}, fmt.Errorf("task %s: %w", id, ErrNotFound)
}

// Create adds an open task written by the board's principal; r.ID and r.At are set here.
func (b *Board) Create(ctx context.Context, r TaskRow) (Task, error) {
	r.ID, r.At = newID(), b.now().UTC()
	if err := r.Check(); err != nil {
		return Task{}, err
	}
	if err := b.create(ctx, key(kindTask, r.ID, b.me), r); err != nil {
		return Task{}, fmt.Errorf("create task: %w", err)
	}
	return b.Get(ctx, r.ID)
}

// Claim makes the board's principal the task's holder, or fails with ErrHeld naming the
// holder; the holder's claim renews its lease. Of any number of racing claimers exactly one wins: each writes its own claim
// row, and the first in the bucket's stream order holds the task; the others remove
// theirs.
func (b *Board) Claim(ctx context.Context, id string) (Task, error) {
	t, err := b.Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	me := b.me.String()
	switch {
	case t.Holder == me && active(t.Status): // claiming again renews the lease
		if err := b.put(ctx, key(kindStatus, id, b.me), StatusRow{Status: t.Status, Note: t.Note, At: b.now().UTC()}); err != nil {
			return t, fmt.Errorf("renew task %s: %w", id, err)
		}
		return b.Get(ctx, id)
	case Terminal(t.Status):
		return t, fmt.Errorf("claim task %s: %w (%s)", id, ErrFinished, t.Status)
	case t.Holder != "":
		return t, fmt.Errorf("claim task %s: %w: %s holds it (%s)", id, ErrHeld, t.Holder, t.Status)
	case t.Assignee != "" && t.Assignee != me:
		return t, fmt.Errorf("claim task %s: %w: it is assigned to %s", id, ErrNotYours, t.Assignee)
	}
	k := key(kindClaim, id, b.me)
	row, err := json.Marshal(ClaimRow{At: b.now().UTC()})
	if err != nil {
		return Task{}, fmt.Errorf("claim task %s: %w", id, err)
	}
	rev, err := b.kv.Create(ctx, k, row)
	if errors.Is(err, jetstream.ErrKeyExists) { // an earlier claim, released or lapsed: write it again, later in order
		var e jetstream.KeyValueEntry
		if e, err = b.kv.Get(ctx, k); err == nil {
			rev, err = b.kv.Update(ctx, k, row, e.Revision())
		}
	}
	if err != nil {
		return Task{}, fmt.Errorf("claim task %s: %w", id, err)
	}
	t, err = b.Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if t.Holder == me {
		return t, nil
	}
	// Lost the race: take the claim back, so it cannot win later when the winner's lapses.
	if derr := b.kv.Delete(ctx, k, jetstream.LastRevision(rev)); derr != nil && !errors.Is(derr, jetstream.ErrKeyExists) {
		return t, fmt.Errorf("claim task %s: %w: %s holds it; withdrawing the claim: %w", id, ErrHeld, t.Holder, derr)
	}
	return t, fmt.Errorf("claim task %s: %w: %s holds it (%s)", id, ErrHeld, t.Holder, t.Status)
}

// Update sets the task's status with a note. The holder may set any status (open
// releases the task); anyone else may only cancel, the creator an unfinished task and
// anyone an open one. A finished task changes no more.
func (b *Board) Update(ctx context.Context, id, status, note string) (Task, error) {
	if !ValidStatus(status) {
		return Task{}, fmt.Errorf("%w: status %q: want one of %s", ErrBadInput, status, strings.Join(Statuses, ", "))
	}
	if len(note) > MaxNote {
		return Task{}, fmt.Errorf("%w: note: %d bytes, want at most %d", ErrBadInput, len(note), MaxNote)
	}
	t, err := b.Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	me := b.me.String()
	switch {
	case Terminal(t.Status):
		return t, fmt.Errorf("update task %s: %w (%s)", id, ErrFinished, t.Status)
	case t.Holder == me:
	case status == Cancelled && (t.Creator == me || t.Status == Open):
	case t.Holder == "":
		return t, fmt.Errorf("update task %s: %w: nobody holds it; claim it first (only cancelling an open task needs no claim)", id, ErrNotYours)
	default:
		return t, fmt.Errorf("update task %s: %w: %s holds it", id, ErrNotYours, t.Holder)
	}
	if err := b.put(ctx, key(kindStatus, id, b.me), StatusRow{Status: status, Note: note, At: b.now().UTC()}); err != nil {
		return Task{}, fmt.Errorf("update task %s: %w", id, err)
	}
	return b.Get(ctx, id)
}

// Renew rewrites the status row of every unfinished task the board's principal holds,
// which renews its lease, and returns their ids.
func (b *Board) Renew(ctx context.Context) ([]string, error) {
	all, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range all {
		if t.Holder != b.me.String() || !active(t.Status) {
			continue
		}
		if err := b.put(ctx, key(kindStatus, t.ID, b.me), StatusRow{Status: t.Status, Note: t.Note, At: b.now().UTC()}); err != nil {
			return ids, fmt.Errorf("renew task %s: %w", t.ID, err)
		}
		ids = append(ids, t.ID)
	}
	return ids, nil
}

// RenewEvery renews the board's claims every interval until ctx ends; tick, when set,
// replaces the ticker (a test's clock). Errors go to onErr, which may be nil.
func (b *Board) RenewEvery(ctx context.Context, tick <-chan time.Time, onErr func(error)) {
	if tick == nil {
		t := time.NewTicker(b.lease / 4)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if _, err := b.Renew(ctx); err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// LeaseLength is the board's lease.
func (b *Board) LeaseLength() time.Duration { return b.lease }

func (b *Board) create(ctx context.Context, k string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = b.kv.Create(ctx, k, data)
	return err
}

func (b *Board) put(ctx context.Context, k string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = b.kv.Put(ctx, k, data)
	return err
}

// newID is a fresh task id: 12 of a-z 2-7 (60 random bits).
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var raw [12]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	for i := range raw {
		raw[i] = alphabet[raw[i]&31]
	}
	return string(raw[:])
}

// scan reads the latest message of every key matching filter (a key pattern) in stream
// order by batch Direct Get (client.ScanBucket), which needs no consumer (an agent may
// create none on the bucket).
func (b *Board) scan(ctx context.Context, filter string) ([]Row, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	recs, err := client.ScanBucket(ctx, b.nc, b.bucket, filter, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", b.bucket, err)
	}
	rows := make([]Row, len(recs))
	for i, r := range recs {
		rows[i] = Row{Key: r.Key, Value: r.Value, Seq: r.Seq, Deleted: r.Op != jetstream.KeyValuePut}
	}
	return rows, nil
}
