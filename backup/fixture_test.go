package backup

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// TestManifestFixture holds the manifest's exact shape (docs/interop.md): the fixture
// decodes strictly, passes the checks Open makes, and encodes back byte for byte.
func TestManifestFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := strictjson.Decode(raw, &m); err != nil {
		t.Fatal(err)
	}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	back, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(back, '\n'), raw) {
		t.Fatalf("manifest re-encodes differently:\n%s", back)
	}
}
