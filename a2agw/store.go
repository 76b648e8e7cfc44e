package a2agw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// record is one task as the bucket keeps it under task.<id>: the A2A task, who serves it
// and the cotal messages sent for it. Each sent message's id is also a key
// ask.<message id> whose value is the task id, so a reply (replyTo the message) finds its
// task after a gateway restart.
type record struct {
	Task   Task   `json:"task"`
	Target string `json:"target"`         // the exposed name the caller addressed
	Peer   string `json:"peer,omitempty"` // the principal a DM went to (an agent target)
	Role   string `json:"role,omitempty"` // the role an ask went to (a role target)
	// Asks are the ids of the cotal messages the gateway sent for the task, in order.
	Asks []string `json:"asks"`
	// LastReply is the id of the agent's latest reply: a follow-up answers it.
	LastReply string `json:"lastReply,omitempty"`
	// Replier is who answered last (for a role, the holder that took the ask).
	Replier string      `json:"replier,omitempty"`
	Push    *PushConfig `json:"push,omitempty"`
	Updated int64       `json:"updated"` // epoch ms of the last change
	// BoardTask is the id of the task board's mirror of a role task (board.go).
	BoardTask string `json:"boardTask,omitempty"`
}

// maxHistory bounds the messages a task keeps (the oldest go first).
const maxHistory = 50

// store keeps records in the gateway's bucket.
type store struct{ kv jetstream.KeyValue }

func taskKey(id string) string { return "task." + id }
func askKey(id string) string  { return "ask." + id }

// errNoTask reports a task id the bucket does not hold.
var errNoTask = errors.New("no such task")

// get reads a task and its revision.
func (s store) get(ctx context.Context, id string) (*record, uint64, error) {
	e, err := s.kv.Get(ctx, taskKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, errNoTask
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read task %s: %w", id, err)
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("read task %s: %w", id, err)
	}
	return &r, e.Revision(), nil
}

// create stores a new task and the index key of its first message.
func (s store) create(ctx context.Context, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store task %s: %w", r.Task.ID, err)
	}
	if _, err := s.kv.Create(ctx, taskKey(r.Task.ID), b); err != nil {
		return fmt.Errorf("store task %s: %w", r.Task.ID, err)
	}
	for _, a := range r.Asks {
		if err := s.index(ctx, a, r.Task.ID); err != nil {
			return err
		}
	}
	return nil
}

// index records that message id belongs to task.
func (s store) index(ctx context.Context, id, task string) error {
	if _, err := s.kv.Put(ctx, askKey(id), []byte(task)); err != nil {
		return fmt.Errorf("store message %s of task %s: %w", id, task, err)
	}
	return nil
}

// taskOf returns the task a sent message belongs to, or errNoTask.
func (s store) taskOf(ctx context.Context, id string) (string, error) {
	e, err := s.kv.Get(ctx, askKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", errNoTask
	}
	if err != nil {
		return "", fmt.Errorf("read message %s: %w", id, err)
	}
	return string(e.Value()), nil
}

// update applies change to a task at its revision, retrying when another write came
// first. change returns false to leave the task as it is.
func (s store) update(ctx context.Context, id string, change func(*record) (bool, error)) (*record, bool, error) {
	for range 16 {
		r, rev, err := s.get(ctx, id)
		if err != nil {
			return nil, false, err
		}
		changed, err := change(r)
		if err != nil || !changed {
			return r, false, err
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, false, fmt.Errorf("store task %s: %w", id, err)
		}
		_, err = s.kv.Update(ctx, taskKey(id), b, rev)
		if err == nil {
			return r, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, false, fmt.Errorf("store task %s: %w", id, err)
		}
	}
	return nil, false, fmt.Errorf("store task %s: too many concurrent changes", id)
}
