package protocol_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// TestPresenceExtensionsGolden: the presence record's Go extension (channels) and the
// reference's reserved card meta keys Go writes (connector, model, cwd) have exactly the
// shape docs/interop.md documents (testdata/presence-extensions.json); a record without
// channels omits the field, as a reference peer writes it.
func TestPresenceExtensionsGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/presence-extensions.json")
	if err != nil {
		t.Fatal(err)
	}
	p := protocol.Presence{Card: protocol.AgentCard{ID: "local.alice", Name: "alice", Kind: protocol.CardAgent, ProtocolVersion: "0.4",
		Meta: map[string]any{"connector": "codex", "model": "gpt-5", "cwd": "svc/api"}},
		Status: protocol.StatusWorking, TS: 1764504000000, Channels: []string{"general", "team.>"}}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("presence encodes as\n%s\nwant\n%s", got, want)
	}
	back, err := protocol.DecodePresence("local.alice", want)
	if err != nil || len(back.Channels) != 2 || back.Channels[1] != "team.>" {
		t.Fatalf("decode: %+v, %v", back, err)
	}
	p.Channels = nil
	if b, _ := json.Marshal(p); bytes.Contains(b, []byte(`"channels"`)) {
		t.Fatalf("a record without channels carries the field: %s", b)
	}
}
