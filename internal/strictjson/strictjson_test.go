package strictjson

import (
	"errors"
	"testing"
)

// TestDecode: one closed object decodes; unknown fields, trailing values and bad JSON do not.
func TestDecode(t *testing.T) {
	type doc struct {
		A int `json:"a"`
	}
	var d doc
	if err := Decode([]byte(` {"a": 1} `), &d); err != nil || d.A != 1 {
		t.Fatalf("good document: %v %+v", err, d)
	}
	for _, in := range []string{`{"a": 1, "b": 2}`, `{"a": 1} {}`, `{"a": 1}x`, `{"a": `, ``} {
		if err := Decode([]byte(in), &d); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if err := Decode([]byte(`{"a":1} 2`), &d); !errors.Is(err, ErrTrailing) {
		t.Errorf("trailing value: %v, want ErrTrailing", err)
	}
}

// TestExactKeys: keys match field names exactly, at every depth, and only once.
func TestExactKeys(t *testing.T) {
	type inner struct {
		B string `json:"b"`
	}
	type embedded struct {
		E int `json:"e"`
	}
	type doc struct {
		embedded
		A     int              `json:"a"`
		In    inner            `json:"in"`
		List  []inner          `json:"list"`
		Map   map[string]inner `json:"map"`
		Ptr   *inner           `json:"ptr"`
		Raw   []byte           `json:"raw"`
		Plain string
	}
	good := `{"a":1,"e":2,"in":{"b":"x"},"list":[{"b":"y"}],"map":{"k":{"b":"z"}},"ptr":{"b":"w"},"Plain":"p"}`
	var d doc
	if err := Decode([]byte(good), &d); err != nil || d.E != 2 || d.List[0].B != "y" || d.Map["k"].B != "z" || d.Ptr.B != "w" {
		t.Fatalf("good document: %v %+v", err, d)
	}
	for _, in := range []string{
		`{"A":1}`,
		`{"a":1,"a":2}`,
		`{"in":{"B":"x"}}`,
		`{"list":[{"b":"y"},{"B":"y"}]}`,
		`{"map":{"k":{"B":"z"}}}`,
		`{"ptr":{"B":"w"}}`,
		`{"E":2}`,
		`{"plain":"p"}`,
	} {
		if err := Decode([]byte(in), &doc{}); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

// FuzzDecode: Decode never panics and never accepts trailing data.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte(`{"a":1}{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v struct {
			A any `json:"a"`
		}
		_ = Decode(b, &v)
	})
}
