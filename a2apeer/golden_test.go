package a2apeer

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// TestRegistrationGolden: the registry row is exactly the shape docs/interop.md documents
// (testdata/registration.json), stored under its name, and decodes back; under another
// key it is nobody's row.
func TestRegistrationGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/registration.json")
	if err != nil {
		t.Fatal(err)
	}
	r := Registration{Name: "support", URL: "https://agents.example.com/support",
		CardURL: "https://agents.example.com/support/.well-known/agent-card.json", Endpoint: "https://agents.example.com/support/rpc",
		Role: "helpdesk", AgentName: "Support Agent", Description: "Answers product questions", Version: "2.1.0", ProtocolVersion: "0.3.0",
		Skills: []protocol.Skill{{ID: "faq", Name: "FAQ", Description: "answers from the product FAQ"}}, Token: true, Added: 1764504000000}
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("row encodes as\n%s\nwant\n%s", got, want)
	}
	back, err := Decode("support", want)
	if err != nil || back.Name != r.Name || back.Endpoint != r.Endpoint || len(back.Skills) != 1 {
		t.Fatalf("decode: %+v, %v", back, err)
	}
	if _, err := Decode("other", want); err == nil {
		t.Fatal("a row decoded under another name")
	}
	bad := bytes.Replace(want, []byte("https://agents.example.com/support/rpc"), []byte("http://agents.example.com/rpc"), 1)
	if _, err := Decode("support", bad); err == nil {
		t.Fatal("a row with a plain-http endpoint off loopback decoded")
	}
}
