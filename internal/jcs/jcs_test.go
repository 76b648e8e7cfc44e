package jcs

import (
	"math"
	"testing"
)

// TestMarshal: keys in UTF-16 order at every depth, ECMAScript numbers, escapes as RFC 8785
// §3.2.2.2 writes them, no whitespace.
func TestMarshal(t *testing.T) {
	v := map[string]any{
		"b": []any{1e21, 1e-7, 0.5, math.Copysign(0, -1), 100},
		"a": map[string]any{"\u20ac": "x", "\r": "\u0001\"\\\n", "1": true},
		"c": nil,
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"\r":"\u0001\"\\\n","1":true,"€":"x"},"b":[1e+21,1e-7,0.5,0,100],"c":null}`
	if string(got) != want {
		t.Fatalf("Marshal = %s\nwant      %s", got, want)
	}
}

// TestNotFinite: NaN and the infinities have no canonical form; the error names the path.
func TestNotFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := Canonical(map[string]any{"k": []any{f}}); err == nil || err.Error()[:7] != "$.k[0]:" {
			t.Errorf("Canonical(%v) = %v, want an error at $.k[0]", f, err)
		}
	}
}
