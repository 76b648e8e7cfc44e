package a2apeer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// MaxTaskAge bounds how long a recorded task is followed across bridge restarts: a task
// accepted longer ago is answered with a failure DM and dropped, unasked.
const MaxTaskAge = 24 * time.Hour

// maxTaskField bounds each text field of a task record.
const maxTaskField = 1024

// TaskRecord is an outbound task the agent accepted and has not yet answered: a row of
// the registry bucket under TaskKey(Peer, Task), written before the cotal message is
// acked and deleted once the answer DM is stored, so a bridge that restarts follows it
// again.
type TaskRecord struct {
	Peer        string `json:"peer"`                    // the registered agent's name
	Task        string `json:"task"`                    // the agent's task id
	TaskContext string `json:"taskContextId,omitempty"` // the task's A2A context
	From        string `json:"from"`                    // the asker's principal
	Message     string `json:"messageId"`               // the cotal message the task answers
	Context     string `json:"contextId,omitempty"`     // that message's cotal context, if any
	Accepted    int64  `json:"accepted"`                // when the agent accepted it, unix ms
}

// TaskKey is the key of the record of peer's task id: task.<peer>.<32 hex digits of the
// id's SHA-256> (a task id may hold any text; a key may not).
func TaskKey(peer, id string) string {
	sum := sha256.Sum256([]byte(id))
	return taskPrefix(peer) + hex.EncodeToString(sum[:16])
}

func taskPrefix(peer string) string { return "task." + peer + "." }

// Check validates a record read from the bucket or about to be written.
func (r TaskRecord) Check() error {
	if err := CheckName(r.Peer); err != nil {
		return err
	}
	if _, err := protocol.ParsePrincipal(r.From); err != nil {
		return fmt.Errorf("from: %w", err)
	}
	for _, f := range []string{r.Task, r.Message} {
		if f == "" || len(f) > maxTaskField {
			return fmt.Errorf("task %q of message %q: want 1 to %d bytes each", r.Task, r.Message, maxTaskField)
		}
	}
	if len(r.TaskContext) > maxTaskField || len(r.Context) > maxTaskField {
		return fmt.Errorf("task %q: a context id over %d bytes", r.Task, maxTaskField)
	}
	if err := client.CheckID(r.Message); err != nil {
		return err
	}
	return nil
}

// DecodeTask parses the record stored under key and checks it; key must be its TaskKey.
func DecodeTask(key string, b []byte) (TaskRecord, error) {
	var r TaskRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return TaskRecord{}, fmt.Errorf("a2a task %q: %w", key, err)
	}
	if err := r.Check(); err != nil {
		return TaskRecord{}, fmt.Errorf("a2a task %q: %w", key, err)
	}
	if TaskKey(r.Peer, r.Task) != key {
		return TaskRecord{}, fmt.Errorf("a2a task %q: the row names task %q of %s", key, r.Task, r.Peer)
	}
	return r, nil
}

// answerID is the id of the answer to record r: the same for every bridge that answers
// it, so a second answer within the stream's duplicate window is dropped by JetStream.
func answerID(r TaskRecord) string {
	s := sha256.Sum256([]byte("a2a-answer\x00" + r.Peer + "\x00" + r.Task + "\x00" + r.Message))
	h := hex.EncodeToString(s[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (b *Bridge) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// record keeps r, so a bridge started later follows the task.
func (p *peer) record(ctx context.Context, r TaskRecord) error {
	kv, err := (&Store{JS: p.b.JS, Space: p.b.Space}).bucket(ctx)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode a2a task %s: %w", r.Task, err)
	}
	if _, err := kv.Put(ctx, TaskKey(r.Peer, r.Task), v); err != nil {
		return fmt.Errorf("record a2a task %s of %s: %w", r.Task, r.Peer, err)
	}
	return nil
}

// forget deletes the record of r once its answer is stored.
func (p *peer) forget(ctx context.Context, r TaskRecord) {
	kv, err := (&Store{JS: p.b.JS, Space: p.b.Space}).bucket(ctx)
	if err == nil {
		err = kv.Delete(ctx, TaskKey(r.Peer, r.Task))
	}
	if err != nil && ctx.Err() == nil {
		p.log.Warn("a2a task record not deleted", "task", r.Task, "err", err)
	}
}

// recorded lists the tasks recorded for this peer; a row that does not decode is
// deleted (nothing can follow it).
func (p *peer) recorded(ctx context.Context) ([]TaskRecord, error) {
	kv, err := (&Store{JS: p.b.JS, Space: p.b.Space}).bucket(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeysFiltered(ctx, taskPrefix(p.reg.Name)+"*")
	if err != nil {
		return nil, fmt.Errorf("list a2a tasks of %s: %w", p.reg.Name, err)
	}
	var out []TaskRecord
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read a2a task %s: %w", k, err)
		}
		r, err := DecodeTask(k, e.Value())
		if err != nil || r.Peer != p.reg.Name {
			p.log.Warn("a2a task row dropped", "key", k, "err", err)
			_ = kv.Delete(ctx, k)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// resume follows a task recorded by an earlier bridge and answers its asker: at once
// with a failure when it is older than MaxTaskAge, else once it settles (or TaskTimeout
// after it was accepted, polling it at least once).
func (p *peer) resume(ctx context.Context, ep *client.Endpoint, c *Caller, r TaskRecord) {
	asker, err := protocol.ParsePrincipal(r.From)
	if err != nil { // Check made this impossible
		return
	}
	accepted := time.UnixMilli(r.Accepted)
	t := &Task{ID: r.Task, ContextID: r.TaskContext}
	if age := p.b.now().Sub(accepted); age > MaxTaskAge {
		t.Status = TaskStatus{State: StateFailed, Message: &Message{Parts: []Part{{Kind: "text",
			Text: fmt.Sprintf("cotal stopped following the task: accepted %s ago, past the %s limit", age.Round(time.Minute), MaxTaskAge)}}}}
	} else {
		p.log.Info("a2a task followed again", "task", r.Task, "from", r.From)
		t = p.follow(ctx, c, t, accepted.Add(orDefault(p.b.TaskTimeout, 30*time.Minute)))
		if ctx.Err() != nil {
			return // still recorded: the next bridge follows it
		}
	}
	p.remember(r.From, t.ContextID, t)
	p.settle(ctx, ep, asker, r, t)
}

// settle answers r's asker with what task t says, and forgets r once the answer is
// stored.
func (p *peer) settle(ctx context.Context, ep *client.Endpoint, asker protocol.Principal, r TaskRecord, t *Task) {
	contextID := r.Context
	if contextID == "" {
		contextID = t.ContextID
	}
	d := client.Draft{ID: answerID(r), Parts: []protocol.Part{protocol.TextPart(bound(taskText(p.reg.Name, t)))}, ReplyTo: r.Message, ContextID: contextID}
	if _, err := ep.DM(ctx, asker, d); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("answer not delivered", "to", asker.String(), "err", err)
		}
		return // still recorded: the next bridge answers it
	}
	p.forget(ctx, r)
}

// isTaskKey reports a key of a task record rather than a registration.
func isTaskKey(k string) bool { return strings.HasPrefix(k, "task.") }
