package a2apeer_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/a2apeer"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

// restartAgent is an agent whose tasks keep working until settle is set; "ping" is
// answered at once with a message.
func restartAgent(t *testing.T) (a *agent, settle func()) {
	a = newAgent(t)
	done := false
	a.reply = func(a *agent, m a2apeer.Message) (any, int) {
		if m.Parts[0].Text == "ping" {
			return echo(m), http.StatusOK
		}
		return a.task(m, a2apeer.StateSubmitted), http.StatusOK
	}
	a.onGet = func(tk *a2apeer.Task, _ int) {
		if done {
			tk.Status.State = a2apeer.StateCompleted
			tk.Artifacts = []a2apeer.Artifact{{ArtifactID: "a1", Parts: []a2apeer.Part{{Kind: "text", Text: "the long report"}}}}
		} else {
			tk.Status.State = a2apeer.StateWorking
		}
	}
	return a, func() { a.mu.Lock(); done = true; a.mu.Unlock() }
}

// taskRecords counts the task records of the registry bucket.
func (tm *mesh) taskRecords(t *testing.T) int {
	kv, err := tm.js.KeyValue(t.Context(), a2apeer.Bucket(space))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(t.Context(), "task.>")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	return n
}

// gets is how many tasks/get calls the agent served.
func (a *agent) getCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gets
}

// A task accepted before the bridge stopped is followed by the next bridge: the answer
// reaches the asker once, replying to its message, and the record is gone.
func TestBridgeRestartFollowsTask(t *testing.T) {
	tm := newMesh(t)
	a, settle := restartAgent(t)
	tm.register(t, a, "slow", "")
	stop := tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "slow")
	slow := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "slow"}
	sent, err := alice.DM(t.Context(), slow, client.Text("write the long report"))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the task followed", hang, func() bool { return a.getCount() >= 1 })
	if n := tm.taskRecords(t); n != 1 {
		t.Fatalf("%d task records while the task runs, want 1", n)
	}
	stop()
	settle()
	if n := tm.taskRecords(t); n != 1 {
		t.Fatalf("%d task records after the bridge stopped, want 1", n)
	}

	tm.bridge(t, nil)
	in := answer(t, alice, "slow")
	if in.Text() != "the long report" || in.ReplyTo != sent.ID {
		t.Fatalf("answer %q replying to %q, want the report replying to %q", in.Text(), in.ReplyTo, sent.ID)
	}
	meshtest.Until(t, "the record deleted", hang, func() bool { return tm.taskRecords(t) == 0 })
	// Once: the next message alice gets is the answer to her next one, not the report again.
	if _, err := alice.DM(t.Context(), slow, client.Text("ping")); err != nil {
		t.Fatal(err)
	}
	if in := answer(t, alice, "slow"); in.Text() != "echo: ping" {
		t.Fatalf("next message %q, want the echo of ping", in.Text())
	}
	if n := len(a.messages()); n != 2 {
		t.Fatalf("the agent was sent %d messages, want 2 (the task was not sent again)", n)
	}
}

// A recorded task older than MaxTaskAge is not followed again: its asker is told, and
// the record dropped.
func TestBridgeRestartDropsOldTask(t *testing.T) {
	tm := newMesh(t)
	a, _ := restartAgent(t)
	tm.register(t, a, "slow", "")
	stop := tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "slow")
	sent, err := alice.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "slow"}, client.Text("write the long report"))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the task followed", hang, func() bool { return a.getCount() >= 1 })
	stop()
	before := a.getCount()

	later := time.Now().Add(a2apeer.MaxTaskAge + time.Hour)
	tm.bridge(t, func(b *a2apeer.Bridge) { b.Now = func() time.Time { return later } })
	in := answer(t, alice, "slow")
	if !strings.Contains(in.Text(), "stopped following the task") || !strings.Contains(in.Text(), "failed") || in.ReplyTo != sent.ID {
		t.Fatalf("answer %q replying to %q", in.Text(), in.ReplyTo)
	}
	meshtest.Until(t, "the record deleted", hang, func() bool { return tm.taskRecords(t) == 0 })
	if got := a.getCount(); got != before {
		t.Fatalf("the agent was asked %d more times for a task past the age limit", got-before)
	}
}

// Removing a registration drops the tasks it had accepted: an agent registered later
// under the same name never follows (or answers for) them.
func TestDeleteDropsTaskRecords(t *testing.T) {
	tm := newMesh(t)
	a, _ := restartAgent(t)
	tm.register(t, a, "slow", "")
	stop := tm.bridge(t, nil)
	alice := tm.person(t, "alice")
	online(t, alice, "slow")
	if _, err := alice.DM(t.Context(), protocol.Principal{Owner: protocol.OwnerLocal, Actor: "slow"}, client.Text("write the long report")); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the task followed", hang, func() bool { return tm.taskRecords(t) == 1 })
	stop()
	dropped, err := (&a2apeer.Store{JS: tm.js, Space: space}).Delete(t.Context(), "slow")
	if err != nil || dropped != 1 {
		t.Fatalf("Delete: dropped %d, %v; want 1 task record dropped", dropped, err)
	}
	if n := tm.taskRecords(t); n != 0 {
		t.Fatalf("%d task records after the registration was removed, want 0", n)
	}
}

// A task record is the shape docs/interop.md documents (testdata/task-record.json), under its key; a row under
// another key, or naming a bad asker, is refused.
func TestTaskRecordShape(t *testing.T) {
	r := a2apeer.TaskRecord{Peer: "support", Task: "task/7 ü", TaskContext: "ctx-1", From: "local.alice",
		Message: "0f8c7e1a-5d0b-4c62-9d55-3a3f1c0e2b9d", Accepted: 1764504000000}
	key := a2apeer.TaskKey("support", r.Task)
	if !strings.HasPrefix(key, "task.support.") || len(key) != len("task.support.")+32 {
		t.Fatalf("key %q", key)
	}
	b, err := os.ReadFile("testdata/task-record.json")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.TrimSpace(b)
	if enc, err := json.Marshal(r); err != nil || !bytes.Equal(enc, b) {
		t.Fatalf("record encodes as\n%s\nwant\n%s (%v)", enc, b, err)
	}
	got, err := a2apeer.DecodeTask(key, b)
	if err != nil || got != r {
		t.Fatalf("decode %+v, %v", got, err)
	}
	if _, err := a2apeer.DecodeTask(a2apeer.TaskKey("support", "other"), b); err == nil {
		t.Fatal("a record decoded under another task's key")
	}
	bad := []byte(strings.Replace(string(b), "local.alice", "alice", 1))
	if _, err := a2apeer.DecodeTask(key, bad); err == nil {
		t.Fatal("a record with a bad asker decoded")
	}
}
