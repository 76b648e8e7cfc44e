package delivery

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestLeaseRowVersion pins the lease row's Go extension "version" (docs/interop.md): the
// row a Go daemon writes, byte for byte, and a reference row without it read as "".
func TestLeaseRowVersion(t *testing.T) {
	want, err := os.ReadFile("testdata/lease-version.json")
	if err != nil {
		t.Fatal(err)
	}
	row := LeaseInfo{Holder: "local.cotal_delivery", Instance: "3e595b80abebb4f4", Host: "build-01", PID: 4242,
		Since: 1764504000000, Ready: true, Version: "v1.2.3"}
	got, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Fatalf("lease row\n got %s\nwant %s", got, want)
	}
	back, err := decodeLease(want)
	if err != nil || back != row {
		t.Fatalf("decode the fixture: %+v, %v", back, err)
	}
	ref, err := decodeLease([]byte(`{"holder":"local.cotal_delivery","incarnation":"i1","since":1764504000000,"ready":true}`))
	if err != nil || ref.Version != "" || ref.Instance != "i1" {
		t.Fatalf("a reference row: %+v, %v", ref, err)
	}
	noVersion, _ := json.Marshal(LeaseInfo{Holder: "h", Instance: "i"})
	if bytes.Contains(noVersion, []byte("version")) {
		t.Fatalf("a row without a version writes none: %s", noVersion)
	}
}
