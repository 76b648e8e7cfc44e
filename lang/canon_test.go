package lang

import (
	"math"
	"testing"
)

// The number and string vectors are RFC 8785's own examples (§3.2.2, §3.2.3,
// Appendix B); the hashes were computed independently from the language's
// rules (JCS, then SHA-256) for these fixtures.
func TestCanonicalRFC8785(t *testing.T) {
	nums := map[float64]string{
		333333333.33333329: "333333333.3333333", 1e30: "1e+30", 4.50: "4.5", 2e-3: "0.002",
		0.000000000000000000000000001: "1e-27", 0: "0", math.Copysign(0, -1): "0",
		9007199254740992: "9007199254740992", 1e21: "1e+21", 1e20: "100000000000000000000",
		0.000001: "0.000001", 1e-7: "1e-7", -1.5: "-1.5", 5e-324: "5e-324",
		1.7976931348623157e308: "1.7976931348623157e+308", 295147905179352830000: "295147905179352830000",
	}
	for f, want := range nums {
		got, err := NumberString(f)
		if err != nil || got != want {
			t.Errorf("NumberString(%v) = %q, %v; want %q", f, got, err, want)
		}
	}
	got, err := Canonical(map[string]any{
		"numbers":  []any{333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001},
		"string":   "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"/",
		"literals": []any{nil, true, false},
	})
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if err != nil || string(got) != want {
		t.Errorf("Canonical = %s, %v\nwant      %s", got, err, want)
	}
	// Keys sort by UTF-16 code units: the surrogate pair of U+1F600 sorts
	// before U+FB33, unlike a code point order.
	sorted, _ := Canonical(map[string]any{"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001F600": 5, "\u0080": 6, "\u00f6": 7})
	if want := "{\"\\r\":2,\"1\":4,\"\u0080\":6,\"\u00f6\":7,\"\u20ac\":1,\"\U0001F600\":5,\"\ufb33\":3}"; string(sorted) != want {
		t.Errorf("key order = %s\nwant        %s", sorted, want)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), struct{}{}, []any{func() {}}} {
		if _, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%v) accepted a value with no canonical form", bad)
		}
	}
}

func TestGoldenHashes(t *testing.T) {
	cases := map[string]string{
		"const a = await spawn(\"a\")\nawait turn(a, { name: \"go\" })\n": "sha256:8c610c8c9e99e3c749cd181a675d8fc170513e1c57b2d9d598c7210ade7a3963",
		"log(\"héllo \\u2028 ✓\")\n":                                      "sha256:ce5bab3ce745dba30a11ffa33957d0fd0ff635368de8a5e5eec02cff2bf69778",
	}
	for src, want := range cases {
		if got := ProgramHash(src); got != want {
			t.Errorf("ProgramHash(%q) = %s, want %s", src, got, want)
		}
	}
	if got, want := RequestID("run-1", "/turn:go#0", "sha256:abc", 0), "uBpjP4KUWzncIYGhPotHaHJPQBA7vrpk8bintgBSAjM"; got != want {
		t.Errorf("RequestID = %s, want %s", got, want)
	}
	if got, _ := Digest(map[string]any{"agent": "agent-a", "deadline": nil}); got != "sha256:63f76682e8e62860579fb4263bdfacc5c9f9e0d8461ea9aebc845578575fe78f" {
		t.Errorf("turn input hash = %s", got)
	}
	if got := Draw("seed", "/parallel:p#0/b:x", 3); got != 0.8799222931276951 {
		t.Errorf("Draw = %v", got)
	}
	if got := Draw("run-1", "", 0); got != 0.9637779297631326 {
		t.Errorf("Draw root = %v", got)
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]int64{"30s": 30_000, "10m": 600_000, "4h": 14_400_000, "2d": 172_800_000, "250ms": 250, "0s": 0}
	for s, want := range good {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "30", "1.5h", "1w", "-1s", "1 h", "1H", "1h30m"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
}
