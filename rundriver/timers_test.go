package rundriver

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// A schedule request's body is the reference's emitScheduleRequest body, field for field
// and in its order (testdata/timer_body.json, written from packages/core/src/
// endpoint-checkpoint.ts).
func TestTimerBodyGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/timer_body.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(timerBody{V: 1, TimerID: "qa31blovmiSdF5JM8nIXUamouTYt7BFqSfl-9C67Wdg", Generation: 1, Deadline: 1_764_720_001_000})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("timer body %s, want %s", got, want)
	}
}
