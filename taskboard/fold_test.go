package taskboard_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/taskboard"
)

// TestGoldenRows: the fixture's rows (the shapes docs/interop.md documents) decode into
// the row types field for field, and fold into the fixture's board: the first claim wins,
// a non-holder's done is ignored, and a claim whose holder went quiet lapses.
func TestGoldenRows(t *testing.T) {
	raw, err := os.ReadFile("testdata/rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Now  time.Time
		Rows []struct {
			Seq   uint64
			Key   string
			Value json.RawMessage
		}
		Fold []json.RawMessage
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	var rows []taskboard.Row
	for _, r := range fx.Rows {
		// Each value round-trips through its row type unchanged: no field is unknown.
		var v any
		switch r.Key[0] {
		case 't':
			v = &taskboard.TaskRow{}
		case 'c':
			v = &taskboard.ClaimRow{}
		default:
			v = &taskboard.StatusRow{}
		}
		if err := json.Unmarshal(r.Value, v); err != nil {
			t.Fatal(err)
		}
		back, _ := json.Marshal(v)
		if !sameJSON(t, back, r.Value) {
			t.Fatalf("row %s: %s round-trips as %s", r.Key, r.Value, back)
		}
		rows = append(rows, taskboard.Row{Key: r.Key, Value: r.Value, Seq: r.Seq})
	}
	got := taskboard.Fold(rows, fx.Now, taskboard.Lease)
	if len(got) != len(fx.Fold) {
		t.Fatalf("fold has %d tasks, want %d", len(got), len(fx.Fold))
	}
	for i, task := range got {
		b, _ := json.Marshal(task)
		if !sameJSON(t, b, fx.Fold[i]) {
			t.Fatalf("task %d:\n got %s\nwant %s", i, b, fx.Fold[i])
		}
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
