package runstore

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// Each golden fixture is a record as the reference writes it (field names, order and
// units from run-journal.ts, journal.ts, run-record.ts, run-program.ts and
// checkpoint-answer.ts): it decodes, and encodes back to the same bytes.
func TestGoldenRecordsBothWays(t *testing.T) {
	for file, v := range map[string]any{
		"run-spec.json":        &RunSpec{},
		"run-spec-forked.json": &RunSpec{},
		"run-status.json":      &RunStatus{},
		"program.json":         &Program{},
		"answer.json":          &Answer{},
		// The checkpoint plane (endpoint-checkpoint.ts): spec, status waiting and
		// resumed (with the newer settledAnswerId), settle facts resumed and expired.
		"cp-spec.json":           &CheckpointSpec{},
		"cp-status-waiting.json": &CheckpointStatus{},
		"cp-status-resumed.json": &CheckpointStatus{},
		"settle-resumed.json":    &SettleFact{},
		"settle-expired.json":    &SettleFact{},
	} {
		b := fixture(t, file)
		if err := strictjson.Decode(b, v); err != nil {
			t.Fatalf("%s: decode: %v", file, err)
		}
		out, err := marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s re-encoded differs:\n got %s\nwant %s", file, out, b)
		}
	}
	for _, file := range []string{"activation.json", "step-pending.json", "step-settled.json", "step-failed.json"} {
		b := fixture(t, file)
		r, err := ParseRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var v any = r.Activation
		if r.Step != nil {
			// The entry re-encodes to the bytes it came as, and the step around it too.
			eb, err := marshal(r.Entry)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(eb, r.Step.Entry) {
				t.Errorf("%s entry re-encoded differs:\n got %s\nwant %s", file, eb, r.Step.Entry)
			}
			v = r.Step
		}
		out, err := marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s re-encoded differs:\n got %s\nwant %s", file, out, b)
		}
	}
	r, _ := ParseRecord(fixture(t, "step-settled.json"))
	if r.Entry.Key() != "/checkpoint:issue#0" || r.Entry.State != "settled" || *r.Entry.EndedAt != 1764720360000 {
		t.Errorf("settled entry read as %+v", r.Entry)
	}
}

// The answer id is the reference's derivation: a retry of the same answer names the same
// record, and the fixture's id is what the canonical form hashes to.
func TestAnswerID(t *testing.T) {
	var a Answer
	if err := strictjson.Decode(fixture(t, "answer.json"), &a); err != nil {
		t.Fatal(err)
	}
	var value any
	if err := json.Unmarshal(a.Value, &value); err != nil {
		t.Fatal(err)
	}
	id, err := AnswerID(a.Token, a.By, value, "")
	if err != nil || id != a.AnswerID {
		t.Fatalf("answer id %q, %v; want %q", id, err, a.AnswerID)
	}
	other, _ := AnswerID(a.Token, "bob", value, "")
	if other == id || len(other) != 43 {
		t.Fatalf("bob's answer id %q", other)
	}
}

// The envelope is closed: an unknown field, an unknown kind, another version, or an
// activation without a fencing token is refused. An entry's unknown field is not.
func TestParseRecordRefuses(t *testing.T) {
	for _, bad := range []string{
		`{"v":1,"kind":"activation","run":"r","n":0,"holder":"h","fencingToken":1,"epoch":1,"replayedTo":0,"at":1,"extra":1}`,
		`{"v":1,"kind":"activation","run":"r","n":0,"holder":"h","fencingToken":0,"epoch":1,"replayedTo":0,"at":1}`,
		`{"v":2,"kind":"step","run":"r","n":0,"at":1,"entry":{}}`,
		`{"v":1,"kind":"note","run":"r","n":0,"at":1}`,
		`{"v":1,"kind":"step","run":"r","n":0,"at":1}`,
	} {
		if _, err := ParseRecord([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	ok := `{"v":1,"kind":"step","run":"r","n":1,"at":1,"entry":{"v":1,"seq":0,"run":"r","scope":"","kind":"sleep","name":"","occurrence":0,"inputHash":"h","state":"pending","startedAt":1,"later":true}}`
	if _, err := ParseRecord([]byte(ok)); err != nil {
		t.Errorf("an entry with an unknown field: %v", err)
	}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
