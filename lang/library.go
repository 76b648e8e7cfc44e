package lang

import (
	"bytes"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

type builtinFn = func(c *callCtx, args []Value) (Value, error)

func wantArray(name string, v Value) (*Array, error) {
	a, ok := v.(*Array)
	if !ok {
		return nil, fault("L4016", "%s takes an array, not a %s", name, kindOf(v))
	}
	return a, nil
}

func wantRecord(name string, v Value) (*Record, error) {
	r, ok := v.(*Record)
	if !ok {
		return nil, fault("L4016", "%s takes a record, not a %s", name, kindOf(v))
	}
	return r, nil
}

func wantString(name string, v Value) (string, error) {
	if isContainer(v) {
		return "", fault("L4018", "%s takes a primitive, not a %s", name, kindOf(v))
	}
	return toStr(v, name)
}

func wantNum(name string, v Value) (float64, error) {
	if isContainer(v) {
		return 0, fault("L4018", "%s takes a primitive, not a %s", name, kindOf(v))
	}
	return toNum(v, name)
}

func (c *callCtx) arr(vals []Value) *Array { return &Array{elems: vals, owner: c.br} }

// callEach calls f(item, index[, array]) one element at a time, in order.
func (c *callCtx) callEach(f Value, a *Array, withArray bool, each func(i int, item, r Value) (bool, error)) error {
	items := a.list()
	for i, item := range items {
		args := []Value{item, float64(i)}
		if withArray {
			args = append(args, a)
		}
		r, err := c.in.call(f, args, c.br)
		if err != nil {
			return err
		}
		stop, err := each(i, item, r)
		if err != nil || stop {
			return err
		}
	}
	return nil
}

func (in *interp) installLibrary(def func(string, builtinFn)) {
	def("keys", func(c *callCtx, a []Value) (Value, error) {
		r, err := wantRecord("keys", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		var out []Value
		for _, k := range r.ownKeys() {
			out = append(out, k)
		}
		return c.arr(out), nil
	})
	def("values", func(c *callCtx, a []Value) (Value, error) {
		r, err := wantRecord("values", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		var out []Value
		for _, k := range r.ownKeys() {
			v, _ := r.get(k)
			out = append(out, v)
		}
		return c.arr(out), nil
	})
	def("entries", func(c *callCtx, a []Value) (Value, error) {
		r, err := wantRecord("entries", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		var out []Value
		for _, k := range r.ownKeys() {
			v, _ := r.get(k)
			out = append(out, c.arr([]Value{k, v}))
		}
		return c.arr(out), nil
	})
	def("has", func(c *callCtx, a []Value) (Value, error) {
		r, err := wantRecord("has", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		k, err := wantString("has", argAt(a, 1))
		if err != nil {
			return nil, err
		}
		_, ok := r.get(k)
		return ok, nil
	})
	def("merge", func(c *callCtx, a []Value) (Value, error) {
		out := newRecord(c.br)
		for i := 0; i < 2; i++ {
			r, err := wantRecord("merge", argAt(a, i))
			if err != nil {
				return nil, err
			}
			for _, k := range r.ownKeys() {
				v, _ := r.get(k)
				out.set(k, v)
			}
		}
		return out, nil
	})
	def("len", func(c *callCtx, a []Value) (Value, error) {
		switch x := argAt(a, 0).(type) {
		case *Array:
			return float64(len(x.list())), nil
		case string:
			return float64(utf16Len(x)), nil
		}
		return nil, fault("L4016", "len counts an array or a string, not a %s; for a record use len(keys(r))", kindOf(argAt(a, 0)))
	})
	for _, name := range []string{"map", "filter", "find", "some", "every"} {
		name := name
		def(name, func(c *callCtx, a []Value) (Value, error) {
			xs, err := wantArray(name, argAt(a, 0))
			if err != nil {
				return nil, err
			}
			return c.arrayCallback(name, xs, argAt(a, 1), false)
		})
	}
	def("sort", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("sort", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		return c.sortBy(xs, argAt(a, 1))
	})
	def("slice", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("slice", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		return c.callMethodOn(xs, "slice", a[1:])
	})
	def("concat", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("concat", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		return c.callMethodOn(xs, "concat", a[1:])
	})
	def("join", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("join", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		return c.callMethodOn(xs, "join", a[1:])
	})
	def("reverse", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("reverse", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		return c.callMethodOn(xs, "toReversed", nil)
	})
	def("unique", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("unique", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		var out []Value
		for _, v := range xs.list() {
			dup := false
			for _, o := range out {
				if sameValueZero(o, v) {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, v)
			}
		}
		return c.arr(out), nil
	})
	def("range", func(c *callCtx, a []Value) (Value, error) {
		n, err := wantNum("range", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		if n < 0 || n != math.Trunc(n) || n > 1e7 {
			return nil, fault("L4016", "range takes a whole number between 0 and 10000000")
		}
		out := make([]Value, int(n))
		for i := range out {
			out[i] = float64(i)
		}
		return c.arr(out), nil
	})
	def("sum", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("sum", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		var acc Value = 0.0
		for _, v := range xs.list() {
			if isContainer(v) {
				return nil, fault("L4018", "sum adds primitives, not a %s", kindOf(v))
			}
			acc, _ = binary(tokenPlus, acc, v)
		}
		return acc, nil
	})
	strFn := func(name, method string) {
		def(name, func(c *callCtx, a []Value) (Value, error) {
			s, err := wantString(name, argAt(a, 0))
			if err != nil {
				return nil, err
			}
			return c.callMethodOn(s, method, a[min(1, len(a)):])
		})
	}
	strFn("split", "split")
	strFn("trim", "trim")
	strFn("lower", "toLowerCase")
	strFn("upper", "toUpperCase")
	strFn("startsWith", "startsWith")
	strFn("endsWith", "endsWith")
	strFn("contains", "includes")
	strFn("replace", "replaceAll")
	numFn := func(name string, f func(float64) float64) {
		def(name, func(c *callCtx, a []Value) (Value, error) {
			n, err := wantNum(name, argAt(a, 0))
			if err != nil {
				return nil, err
			}
			return f(n), nil
		})
	}
	numFn("abs", math.Abs)
	numFn("floor", math.Floor)
	numFn("ceil", math.Ceil)
	numFn("round", func(f float64) float64 { return math.Floor(f + 0.5) })
	minmax := func(name string, pick func(a, b float64) bool, start float64) {
		def(name, func(c *callCtx, a []Value) (Value, error) {
			acc := start
			for _, v := range a {
				n, err := wantNum(name, v)
				if err != nil {
					return nil, err
				}
				if math.IsNaN(n) {
					return math.NaN(), nil
				}
				if pick(n, acc) {
					acc = n
				}
			}
			return acc, nil
		})
	}
	minmax("min", func(a, b float64) bool { return a < b }, math.Inf(1))
	minmax("max", func(a, b float64) bool { return a > b }, math.Inf(-1))
	def("parseNumber", func(c *callCtx, a []Value) (Value, error) { return wantNum("parseNumber", argAt(a, 0)) })
	jsonRec := newRecord(nil)
	jsonRec.set("parse", &Builtin{name: "json.parse", fn: func(c *callCtx, a []Value) (Value, error) {
		s, err := wantString("json.parse", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var v any
		if err := dec.Decode(&v); err != nil || dec.More() {
			return nil, fault("L4016", "json.parse: the text is not JSON")
		}
		if hasProtoKey(v) {
			return nil, fault("L4016", "json.parse: a \"__proto__\" key is refused")
		}
		return thaw(v, c.br), nil
	}})
	jsonRec.set("stringify", &Builtin{name: "json.stringify", fn: func(c *callCtx, a []Value) (Value, error) {
		cv, err := toCanon(argAt(a, 0), "json.stringify", map[any]bool{})
		if err != nil {
			return nil, fault("L4016", "json.stringify: %v", err)
		}
		b, err := Canonical(cv)
		if err != nil {
			return nil, fault("L4016", "json.stringify: %v", err)
		}
		return string(b), nil
	}})
	jsonRec.frozen = true
	in.globals.def("json", &slot{v: jsonRec, kind: "reserved", init: true})
	def("assert", func(c *callCtx, a []Value) (Value, error) {
		if truthy(argAt(a, 0)) {
			return Undefined, nil
		}
		msg := "assertion failed"
		if m := argAt(a, 1); m != Undefined {
			s, err := wantString("assert", m)
			if err != nil {
				return nil, err
			}
			msg = s
		}
		return nil, fault("L4012", "%s", msg)
	})
	def("log", func(c *callCtx, a []Value) (Value, error) {
		parts := make([]string, len(a))
		for i, v := range a {
			if hasCode(v, map[any]bool{}) {
				return nil, fault("L4016", "log takes data: argument %d holds a function", i+1)
			}
			parts[i] = display(v)
		}
		c.in.opts.Effects.Log(c.br.path, strings.Join(parts, " "))
		return Undefined, nil
	})
	def("random", func(c *callCtx, a []Value) (Value, error) { return c.draw(), nil })
	def("randomInt", func(c *callCtx, a []Value) (Value, error) {
		n, err := wantNum("randomInt", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		if n < 1 || n != math.Trunc(n) {
			return nil, fault("L4016", "randomInt takes a whole number of at least 1")
		}
		return math.Floor(c.draw() * n), nil
	})
	def("pick", func(c *callCtx, a []Value) (Value, error) {
		xs, err := wantArray("pick", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		items := xs.list()
		if len(items) == 0 {
			return nil, fault("L4016", "pick takes a non-empty array")
		}
		return items[int(math.Floor(c.draw()*float64(len(items))))], nil
	})
	def("now", func(c *callCtx, a []Value) (Value, error) { return float64(c.br.now()), nil })
	def("duration", func(c *callCtx, a []Value) (Value, error) {
		s, err := wantString("duration", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		ms, perr := ParseDuration(s)
		if perr != nil {
			return nil, fault("L4016", "%v", perr)
		}
		return float64(ms), nil
	})
	def("channel", func(c *callCtx, a []Value) (Value, error) {
		s, ok := argAt(a, 0).(string)
		if !ok || s == "" {
			return nil, fault("L4016", "channel takes a channel name")
		}
		r := newRecord(c.br)
		r.set("channel", s)
		return freeze(r), nil
	})
	def("run", func(c *callCtx, a []Value) (Value, error) {
		r := newRecord(c.br)
		r.set("id", c.in.opts.RunID)
		r.set("programHash", c.in.hash)
		r.set("startedAt", float64(c.in.opts.StartedAt))
		return freeze(r), nil
	})
	event := func(name string, build func(c *callCtx, r *Record, a []Value) error) {
		def(name, func(c *callCtx, a []Value) (Value, error) {
			r := newRecord(c.br)
			r.set("event", name)
			if err := build(c, r, a); err != nil {
				return nil, err
			}
			return freeze(r), nil
		})
	}
	agentField := func(c *callCtx, r *Record, a []Value) error {
		id, err := agentID(argAt(a, 0), "the agent")
		if err != nil {
			return err
		}
		r.set("agent", id)
		return nil
	}
	channelName := func(v Value) (string, error) {
		if ch, ok := v.(*Record); ok {
			if s, ok := field(ch, "channel").(string); ok {
				return s, nil
			}
		}
		return "", fault("L4016", "the event needs a channel handle from channel()")
	}
	event("replied", agentField)
	event("down", agentField)
	event("message", func(c *callCtx, r *Record, a []Value) error {
		ch, err := channelName(argAt(a, 0))
		if err != nil {
			return err
		}
		r.set("channel", ch)
		if opts, ok := argAt(a, 1).(*Record); ok {
			for _, k := range []string{"from", "matches"} {
				if v := field(opts, k); v != Undefined {
					if k == "from" {
						if id, err := agentID(v, "from"); err == nil {
							v = id
						}
					}
					r.set(k, v)
				}
			}
		}
		return nil
	})
	event("idle", func(c *callCtx, r *Record, a []Value) error {
		ch, err := channelName(argAt(a, 0))
		if err != nil {
			return err
		}
		d, ok := argAt(a, 1).(string)
		if _, perr := ParseDuration(d); !ok || perr != nil {
			return fault("L4016", "idle needs a duration such as \"10m\"")
		}
		r.set("channel", ch)
		r.set("duration", d)
		return nil
	})
}

// draw is the next PRNG draw of this branch's scope path (LANG §8.2).
func (c *callCtx) draw() float64 {
	c.br.mu.Lock()
	n := c.br.draws
	c.br.draws++
	c.br.mu.Unlock()
	return Draw(c.in.opts.Seed, c.br.path, n)
}

// Draw is the n-th draw in scope path p under seed: the first 48 bits of
// SHA-256(seed NUL p NUL n) divided by 2^48.
func Draw(seed, path string, n int) float64 {
	var b bytes.Buffer
	b.WriteString(seed)
	b.WriteByte(0)
	b.WriteString(path)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(n))
	sum := sha256.Sum256(b.Bytes())
	var x [8]byte
	copy(x[2:], sum[:6])
	return float64(binenc.BigEndian.Uint64(x[:])) / float64(uint64(1)<<48)
}

func hasProtoKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "__proto__" || hasProtoKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasProtoKey(e) {
				return true
			}
		}
	}
	return false
}

func hasCode(v Value, seen map[any]bool) bool {
	switch x := v.(type) {
	case *Closure, *Builtin, *method:
		return true
	case *Array:
		if seen[x] {
			return false
		}
		seen[x] = true
		for _, e := range x.list() {
			if hasCode(e, seen) {
				return true
			}
		}
	case *Record:
		if seen[x] {
			return false
		}
		seen[x] = true
		for _, k := range x.ownKeys() {
			e, _ := x.get(k)
			if hasCode(e, seen) {
				return true
			}
		}
	}
	return false
}

// thaw converts parsed JSON into a fresh, writable program value.
func thaw(v any, br *branch) Value {
	switch x := v.(type) {
	case []any:
		a := &Array{owner: br}
		for _, e := range x {
			a.elems = append(a.elems, thaw(e, br))
		}
		return a
	case map[string]any:
		r := newRecord(br)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			r.set(k, thaw(x[k], br))
		}
		return r
	}
	return v
}

func sameValueZero(a, b Value) bool {
	if x, ok := a.(float64); ok {
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	}
	return strictEqual(a, b)
}

func (c *callCtx) arrayCallback(name string, xs *Array, f Value, withArray bool) (Value, error) {
	if !isCallable(f) {
		return nil, fault("L4011", "%s needs a function", name)
	}
	switch name {
	case "map":
		var out []Value
		err := c.callEach(f, xs, withArray, func(_ int, _, r Value) (bool, error) { out = append(out, r); return false, nil })
		return c.arr(out), err
	case "filter":
		var out []Value
		err := c.callEach(f, xs, withArray, func(_ int, item, r Value) (bool, error) {
			if truthy(r) {
				out = append(out, item)
			}
			return false, nil
		})
		return c.arr(out), err
	case "find":
		var found Value = nil
		if withArray {
			found = Undefined
		}
		err := c.callEach(f, xs, withArray, func(_ int, item, r Value) (bool, error) {
			if truthy(r) {
				found = item
				return true, nil
			}
			return false, nil
		})
		return found, err
	case "findIndex":
		found := -1.0
		err := c.callEach(f, xs, withArray, func(i int, _, r Value) (bool, error) {
			if truthy(r) {
				found = float64(i)
				return true, nil
			}
			return false, nil
		})
		return found, err
	case "some":
		found := false
		err := c.callEach(f, xs, withArray, func(_ int, _, r Value) (bool, error) { found = truthy(r); return found, nil })
		return found, err
	case "every":
		all := true
		err := c.callEach(f, xs, withArray, func(_ int, _, r Value) (bool, error) { all = truthy(r); return !all, nil })
		return all, err
	case "forEach":
		err := c.callEach(f, xs, withArray, func(int, Value, Value) (bool, error) { return false, nil })
		return Undefined, err
	case "flatMap":
		var out []Value
		err := c.callEach(f, xs, withArray, func(_ int, _, r Value) (bool, error) {
			if a, ok := r.(*Array); ok {
				out = append(out, a.list()...)
			} else {
				out = append(out, r)
			}
			return false, nil
		})
		return c.arr(out), err
	}
	return nil, fault("L4014", "an array has no method %q", name)
}

// totalOrder compares two values by the language's total order (LANG §5.3).
func totalOrder(a, b Value) int {
	rank := func(v Value) int {
		switch x := v.(type) {
		case undefinedType:
			return 0
		case nil:
			return 1
		case bool:
			if x {
				return 3
			}
			return 2
		case float64:
			return 4
		case string:
			return 5
		case *Array:
			return 6
		}
		return 7
	}
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case float64:
		y := b.(float64)
		switch {
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return 1
		case math.IsNaN(y):
			return -1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		return compareUTF16(x, b.(string))
	case *Array, *Record:
		return strings.Compare(display(a), display(b))
	}
	return 0
}

func (c *callCtx) sortBy(xs *Array, keyFn Value) (Value, error) {
	items := xs.list()
	keys := make([]Value, len(items))
	for i, it := range items {
		keys[i] = it
		if keyFn != Undefined {
			k, err := c.in.call(keyFn, []Value{it, float64(i)}, c.br)
			if err != nil {
				return nil, err
			}
			keys[i] = k
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		if d := totalOrder(keys[idx[a]], keys[idx[b]]); d != 0 {
			return d < 0
		}
		return totalOrder(items[idx[a]], items[idx[b]]) < 0
	})
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return c.arr(out), nil
}

var _ = fmt.Sprint
