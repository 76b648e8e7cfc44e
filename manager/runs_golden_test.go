package manager

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// The yield record (a Go extension, docs/interop.md) has the exact shape of its golden
// fixture: the fixture decodes closed, and encodes back to the same bytes.
func TestGoldenYieldRecordBothWays(t *testing.T) {
	b, err := os.ReadFile("testdata/yield-record.json")
	if err != nil {
		t.Fatal(err)
	}
	var y yieldRecord
	if err := strictjson.Decode(b, &y); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := json.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("re-encoded differs:\n got %s\nwant %s", out, b)
	}
	if yieldKey("manager", y.GoalID) != "yield.manager."+y.GoalID {
		t.Fatalf("key %s", yieldKey("manager", y.GoalID))
	}
}
