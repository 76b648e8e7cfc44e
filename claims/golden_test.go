package claims

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// TestRecordGolden: the bucket record is exactly the shape docs/interop.md documents
// (testdata/record.json), stored under the key it names, and decodes back.
func TestRecordGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/record.json")
	if err != nil {
		t.Fatal(err)
	}
	rec := Record{Holder: "local.alice", Name: "alice", Path: "internal/cli", Exclusive: true, Reason: "splitting the status command",
		Since: 1764504000000, Renewed: 1764504600000, Expires: 1764508200000}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("record encodes as\n%s\nwant\n%s", got, want)
	}
	key := Key(protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, "internal/cli")
	if key != "local.alice.b906a354dbd14c58bbaa7a87aa0d546c" {
		t.Fatalf("key %q", key)
	}
	back, err := decode(key, want)
	if err != nil || back != rec {
		t.Fatalf("decode: %+v, %v", back, err)
	}
	// The same record under another holder's key, or another path's, is nobody's claim.
	if _, err := decode(Key(protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}, "internal/cli"), want); err == nil {
		t.Fatal("a record naming alice decoded under bob's key")
	}
	if _, err := decode(Key(protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}, "docs"), want); err == nil {
		t.Fatal("a record decoded under another path's key")
	}
}
