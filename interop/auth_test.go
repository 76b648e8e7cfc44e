package interop

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchangewire"
)

// authFixture reads testdata/auth/<name>.
func authFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "auth", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOwnerDerivationVectors: a space whose owner secret is in the reference's form derives
// every owner exactly as the reference's derive.ts does, for subjects JSON.stringify and
// encoding/json would encode differently (HTML characters, U+2028/U+2029, controls).
func TestOwnerDerivationVectors(t *testing.T) {
	var f struct {
		SecretB64 string `json:"secretB64"`
		Vectors   []struct {
			Issuer string `json:"issuer"`
			Sub    string `json:"sub"`
			Owner  string `json:"owner"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(authFixture(t, "owner-vectors.json"), &f); err != nil {
		t.Fatal(err)
	}
	// The reference's owner-secret.json, as its store.ts writes it.
	dir := t.TempDir()
	doc, _ := json.MarshalIndent(map[string]any{"ver": 1, "secretB64": f.SecretB64}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, bearer.OwnerSecretFile), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := bearer.LoadOwnerSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := base64.StdEncoding.DecodeString(f.SecretB64); string(secret.Key) != string(key) || secret.Derivation != bearer.DerivationV1 {
		t.Fatalf("secret %+v: want the fixture's key and the reference's derivation", secret)
	}
	if len(f.Vectors) < 5 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		if got := secret.Owner(v.Issuer, v.Sub); got != v.Owner {
			t.Errorf("owner of (%q, %q) = %s, want %s", v.Issuer, v.Sub, got, v.Owner)
		}
	}
}

// readFile and writeFile keep the auth tests' file access in one place.
func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// TestExchangeRequestFixtures: the reference clients' request bodies decode into Go's
// exchangewire.Request field for field (ttlSec included).
func TestExchangeRequestFixtures(t *testing.T) {
	var h, a exchangewire.Request
	if err := json.Unmarshal(authFixture(t, "exchange-request-human.json"), &h); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(authFixture(t, "exchange-request-agent.json"), &a); err != nil {
		t.Fatal(err)
	}
	if h.IDPToken != "<IdP ID token>" || h.Actor != "alice" || h.TTLSec == nil || *h.TTLSec != 600 {
		t.Errorf("human %+v", h)
	}
	if a.Owner != "u_aaaaaaaaaaaaaaaaaaaaaaaaaa" || a.Actor != "alice" || a.ActorToken != "<actor token>" || a.TTLSec == nil || *a.TTLSec != 300 {
		t.Errorf("agent %+v", a)
	}
}
