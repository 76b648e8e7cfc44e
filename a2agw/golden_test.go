package a2agw

import (
	"encoding/json"
	"os"
	"testing"
)

// TestRecordGolden pins the shape of a task row of cotal_a2a_<space> (docs/interop.md).
func TestRecordGolden(t *testing.T) {
	msg := Message{Kind: "message", MessageID: "m1", Role: "user", Parts: []Part{{Kind: "text", Text: "review x.go"}},
		TaskID: "t1", ContextID: "c1"}
	reply := Message{Kind: "message", MessageID: "r1", Role: "agent", Parts: []Part{{Kind: "text", Text: "looks good"}},
		TaskID: "t1", ContextID: "c1"}
	r := record{Task: Task{Kind: "task", ID: "t1", ContextID: "c1",
		Status:    TaskStatus{State: StateCompleted, Message: &reply, Timestamp: "2030-01-01T00:00:00Z"},
		Artifacts: []Artifact{{ArtifactID: "r1", Name: "reply", Parts: reply.Parts}},
		History:   []Message{msg, reply}},
		Target: "bob", Peer: "local.bob", Asks: []string{"a1"}, LastReply: "r1", Replier: "local.bob",
		Push: &PushConfig{ID: "t1", URL: "http://127.0.0.1:9000/hook", Token: "t0k"}, Updated: 1893456000000}
	got, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const path = "testdata/task-record.json"
	if os.Getenv("COTAL_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("task record:\n%s\nwant (%s):\n%s", got, path, want)
	}
	var back record
	if err := json.Unmarshal(want, &back); err != nil || back.Task.Status.State != StateCompleted || back.Asks[0] != "a1" {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

// TestRoleRecordGolden pins a role task's record: the role asked, and the id of its
// board task (the task board's mirror).
func TestRoleRecordGolden(t *testing.T) {
	r := record{Task: Task{Kind: "task", ID: "t2", ContextID: "c2", Status: TaskStatus{State: StateWorking, Timestamp: "2030-01-01T00:00:00Z"}},
		Target: "review", Role: "review", Asks: []string{"a2"}, Updated: 1893456000000, BoardTask: "k3v9q2m1"}
	got, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const path = "testdata/task-record-role.json"
	if os.Getenv("COTAL_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("role task record:\n%s\nwant (%s):\n%s", got, path, want)
	}
}
