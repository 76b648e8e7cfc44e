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
