package manager

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/uuid"

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

// The told record (a Go extension, docs/interop.md) has the exact shape of its golden
// fixture, both ways, and its msgId is the goal's notice id: a version 8 UUID that every
// manager derives alike from the goal id.
func TestGoldenToldRecordBothWays(t *testing.T) {
	b, err := os.ReadFile("testdata/told-record.json")
	if err != nil {
		t.Fatal(err)
	}
	var r toldRecord
	if err := strictjson.Decode(b, &r); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("re-encoded differs:\n got %s\nwant %s", out, b)
	}
	if toldKey("manager", r.GoalID) != "told.manager."+r.GoalID {
		t.Fatalf("key %s", toldKey("manager", r.GoalID))
	}
	if id := noticeID(r.GoalID); id != r.MsgID {
		t.Fatalf("notice id of %s: %s; want %s", r.GoalID, id, r.MsgID)
	}
	u, err := uuid.Parse(r.MsgID)
	if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("notice id %s: version %d, variant %s, %v; want an RFC 9562 version 8 UUID", r.MsgID, u.Version(), u.Variant(), err)
	}
	if noticeID(r.GoalID+"x") == r.MsgID {
		t.Fatal("two goals share a notice id")
	}
}
