package lang

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// Value is a program value at run time: Undefined, nil (null), bool, float64,
// string, *Array, *Record, *Closure or *Builtin.
type Value = any

type undefinedType struct{}

// Undefined is the value undefined; it never crosses an effect boundary.
var Undefined Value = undefinedType{}

// Array is a program array.
type Array struct {
	mu     sync.Mutex
	elems  []Value
	frozen bool
	owner  *branch // the branch that built it; a write from another branch is L2032
}

// Record is a program record: own string-keyed fields in insertion order.
type Record struct {
	mu     sync.Mutex
	keys   []string
	vals   map[string]Value
	frozen bool
	owner  *branch
}

func newRecord(owner *branch) *Record { return &Record{vals: map[string]Value{}, owner: owner} }

func (r *Record) get(k string) (Value, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vals[k]
	return v, ok
}

func (r *Record) set(k string, v Value) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.vals[k]; !ok {
		r.keys = append(r.keys, k)
	}
	r.vals[k] = v
}

// ownKeys lists the fields in ECMAScript's own-key order: array-index keys
// ascending, then the others in insertion order.
func (r *Record) ownKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var idx, rest []string
	for _, k := range r.keys {
		if _, ok := arrayIndex(k); ok {
			idx = append(idx, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(idx) > 1 {
		sort.Slice(idx, func(a, b int) bool {
			x, _ := arrayIndex(idx[a])
			y, _ := arrayIndex(idx[b])
			return x < y
		})
	}
	return append(idx, rest...)
}

func (a *Array) list() []Value {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Value(nil), a.elems...)
}

// Builtin is a library function or an effect primitive.
type Builtin struct {
	name string
	fn   func(c *callCtx, args []Value) (Value, error)
}

// Fault is a refusal the language raised at run time; a program catches it as
// the frozen record { code, kind: "runtime", message }.
type Fault struct {
	Code    string
	Message string
}

func (f *Fault) Error() string { return f.Code + " " + Titles[f.Code] + ": " + f.Message }

func fault(code, format string, args ...any) *Fault {
	return &Fault{Code: code, Message: fmt.Sprintf(format, args...)}
}

// EffectError is a failure an effect handler reports; a program catches it as
// the frozen record { code, kind, message, detail? }.
type EffectError struct {
	Code    string `json:"code"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

func (e *EffectError) Error() string { return e.Code + " (" + e.Kind + "): " + e.Message }

// ThrowError carries a value the program threw and did not catch.
type ThrowError struct {
	Value any // the thrown value in canonical Go form where it has one
	text  string
}

func (e *ThrowError) Error() string { return "uncaught throw: " + e.text }

type thrown struct{ v Value }

func (t *thrown) Error() string { return "thrown " + display(t.v) }

// freeze deep-freezes a value that crossed an effect boundary.
func freeze(v Value) Value {
	switch x := v.(type) {
	case *Array:
		x.mu.Lock()
		done := x.frozen
		x.frozen = true
		elems := x.elems
		x.mu.Unlock()
		if !done {
			for _, e := range elems {
				freeze(e)
			}
		}
	case *Record:
		x.mu.Lock()
		done := x.frozen
		x.frozen = true
		vals := make([]Value, 0, len(x.vals))
		for _, e := range x.vals {
			vals = append(vals, e)
		}
		x.mu.Unlock()
		if !done {
			for _, e := range vals {
				freeze(e)
			}
		}
	}
	return v
}

// toCanon converts a value that is crossing an effect boundary into its
// canonical Go form, refusing what has none (L3041, L3042) by path.
func toCanon(v Value, path string, seen map[any]bool) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fault("L3041", "%s is the non-finite number %s, which has no canonical form", path, numStr(x))
		}
		return x, nil
	case undefinedType:
		return nil, fault("L3041", "%s is undefined, which has no canonical form", path)
	case *Closure, *Builtin, *method:
		return nil, fault("L3042", "%s is a function, which cannot be effect data", path)
	case *Array:
		if seen[x] {
			return nil, fault("L3041", "%s is cyclic", path)
		}
		seen[x] = true
		defer delete(seen, x)
		out := []any{}
		for i, e := range x.list() {
			c, err := toCanon(e, fmt.Sprintf("%s[%d]", path, i), seen)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	case *Record:
		if seen[x] {
			return nil, fault("L3041", "%s is cyclic", path)
		}
		seen[x] = true
		defer delete(seen, x)
		out := map[string]any{}
		for _, k := range x.ownKeys() {
			e, _ := x.get(k)
			c, err := toCanon(e, path+"."+k, seen)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return nil, fault("L3041", "%s is an opaque value with no canonical form", path)
}

// fromCanon converts a canonical Go value (an effect's result) into a frozen
// program value.
func fromCanon(v any) (Value, error) {
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case []any:
		a := &Array{frozen: true}
		for _, e := range x {
			c, err := fromCanon(e)
			if err != nil {
				return nil, err
			}
			a.elems = append(a.elems, c)
		}
		return a, nil
	case map[string]any:
		r := &Record{vals: map[string]Value{}, frozen: true}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortUTF16(keys)
		for _, k := range keys {
			c, err := fromCanon(x[k])
			if err != nil {
				return nil, err
			}
			r.keys = append(r.keys, k)
			r.vals[k] = c
		}
		return r, nil
	}
	if _, err := Canonical(v); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("a %T has no canonical form", v)
}
