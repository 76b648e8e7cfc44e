package lang

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja/token"
)

const tokenPlus = token.PLUS

var arrayMethods = keySet("map", "filter", "find", "findIndex", "findLast", "findLastIndex", "some", "every", "forEach",
	"reduce", "flatMap", "includes", "indexOf", "lastIndexOf", "slice", "concat", "join", "flat", "at", "toReversed",
	"push", "pop", "shift", "unshift", "splice")

var stringMethods = keySet("trim", "trimStart", "trimEnd", "toLowerCase", "toUpperCase", "startsWith", "endsWith",
	"includes", "indexOf", "lastIndexOf", "slice", "substring", "split", "replace", "replaceAll", "repeat", "padStart",
	"padEnd", "at", "charAt", "concat")

var numberMethods = keySet("toFixed", "toString", "toPrecision")

func (in *interp) callMethod(m *method, args []Value, br *branch) (Value, error) {
	return (&callCtx{in: in, br: br}).callMethodOn(m.recv, m.name, args)
}

// relIndex resolves a relative index argument as slice and at do.
func relIndex(v Value, n int, def int) (int, error) {
	if v == Undefined {
		return def, nil
	}
	f, err := wantNum("index", v)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) {
		f = 0
	}
	f = math.Trunc(f)
	if f < 0 {
		f += float64(n)
		if f < 0 {
			f = 0
		}
	}
	if f > float64(n) {
		f = float64(n)
	}
	return int(f), nil
}

// clampIndex resolves an index argument as substring does: clamped to
// [0, n], never counted from the end.
func clampIndex(v Value, n int, def int) (int, error) {
	if v == Undefined {
		return def, nil
	}
	f, err := wantNum("index", v)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) || f < 0 {
		return 0, nil
	}
	if f > float64(n) {
		return n, nil
	}
	return int(f), nil
}

func (c *callCtx) callMethodOn(recv Value, name string, a []Value) (Value, error) {
	switch r := recv.(type) {
	case *Array:
		return c.arrayMethod(r, name, a)
	case string:
		return c.stringMethod(r, name, a)
	case float64:
		return numberMethod(r, name, a)
	}
	return nil, fault("L4014", "a %s has no method %q", kindOf(recv), name)
}

func (c *callCtx) arrayMethod(xs *Array, name string, a []Value) (Value, error) {
	switch name {
	case "map", "filter", "find", "findIndex", "some", "every", "forEach", "flatMap":
		return c.arrayCallback(name, xs, argAt(a, 0), true)
	case "findLast", "findLastIndex":
		items := xs.list()
		f := argAt(a, 0)
		for i := len(items) - 1; i >= 0; i-- {
			r, err := c.in.call(f, []Value{items[i], float64(i), xs}, c.br)
			if err != nil {
				return nil, err
			}
			if truthy(r) {
				if name == "findLast" {
					return items[i], nil
				}
				return float64(i), nil
			}
		}
		if name == "findLast" {
			return Undefined, nil
		}
		return -1.0, nil
	case "reduce":
		items := xs.list()
		f := argAt(a, 0)
		start := 0
		var acc Value
		if len(a) > 1 {
			acc = a[1]
		} else {
			if len(items) == 0 {
				return nil, fault("L4016", "reduce of an empty array with no initial value")
			}
			acc, start = items[0], 1
		}
		for i := start; i < len(items); i++ {
			r, err := c.in.call(f, []Value{acc, items[i], float64(i), xs}, c.br)
			if err != nil {
				return nil, err
			}
			acc = r
		}
		return acc, nil
	case "includes", "indexOf", "lastIndexOf":
		items := xs.list()
		x := argAt(a, 0)
		if name == "lastIndexOf" {
			for i := len(items) - 1; i >= 0; i-- {
				if strictEqual(items[i], x) {
					return float64(i), nil
				}
			}
			return -1.0, nil
		}
		for i, it := range items {
			if (name == "includes" && sameValueZero(it, x)) || (name == "indexOf" && strictEqual(it, x)) {
				if name == "includes" {
					return true, nil
				}
				return float64(i), nil
			}
		}
		if name == "includes" {
			return false, nil
		}
		return -1.0, nil
	case "slice":
		items := xs.list()
		s, err := relIndex(argAt(a, 0), len(items), 0)
		if err != nil {
			return nil, err
		}
		e, err := relIndex(argAt(a, 1), len(items), len(items))
		if err != nil {
			return nil, err
		}
		if e < s {
			e = s
		}
		return c.arr(append([]Value(nil), items[s:e]...)), nil
	case "concat":
		out := xs.list()
		for _, v := range a {
			if o, ok := v.(*Array); ok {
				out = append(out, o.list()...)
			} else {
				out = append(out, v)
			}
		}
		return c.arr(out), nil
	case "join":
		sep := ","
		if v := argAt(a, 0); v != Undefined {
			s, err := wantString("join", v)
			if err != nil {
				return nil, err
			}
			sep = s
		}
		parts := []string{}
		for _, v := range xs.list() {
			if isNullish(v) {
				parts = append(parts, "")
				continue
			}
			s, err := wantString("join", v)
			if err != nil {
				return nil, err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, sep), nil
	case "flat":
		var out []Value
		for _, v := range xs.list() {
			if o, ok := v.(*Array); ok {
				out = append(out, o.list()...)
			} else {
				out = append(out, v)
			}
		}
		return c.arr(out), nil
	case "at":
		items := xs.list()
		f, err := wantNum("at", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		i := int(math.Trunc(f))
		if i < 0 {
			i += len(items)
		}
		if i < 0 || i >= len(items) {
			return Undefined, nil
		}
		return items[i], nil
	case "toReversed":
		items := xs.list()
		out := make([]Value, len(items))
		for i, v := range items {
			out[len(items)-1-i] = v
		}
		return c.arr(out), nil
	case "push", "pop", "shift", "unshift", "splice":
		if err := canWrite(xs.frozen, xs.owner, c.br, "this array"); err != nil {
			return nil, err
		}
		xs.mu.Lock()
		defer xs.mu.Unlock()
		switch name {
		case "push":
			xs.elems = append(xs.elems, a...)
			return float64(len(xs.elems)), nil
		case "unshift":
			xs.elems = append(append([]Value(nil), a...), xs.elems...)
			return float64(len(xs.elems)), nil
		case "pop":
			if len(xs.elems) == 0 {
				return Undefined, nil
			}
			v := xs.elems[len(xs.elems)-1]
			xs.elems = xs.elems[:len(xs.elems)-1]
			return v, nil
		case "shift":
			if len(xs.elems) == 0 {
				return Undefined, nil
			}
			v := xs.elems[0]
			xs.elems = xs.elems[1:]
			return v, nil
		}
		n := len(xs.elems)
		s, err := relIndex(argAt(a, 0), n, 0)
		if err != nil {
			return nil, err
		}
		del := n - s
		if len(a) > 1 {
			d, err := wantNum("splice", a[1])
			if err != nil {
				return nil, err
			}
			del = int(math.Max(0, math.Min(math.Trunc(d), float64(n-s))))
		}
		removed := append([]Value(nil), xs.elems[s:s+del]...)
		var ins []Value
		if len(a) > 2 {
			ins = a[2:]
		}
		xs.elems = append(append(append([]Value(nil), xs.elems[:s]...), ins...), xs.elems[s+del:]...)
		return c.arr(removed), nil
	}
	return nil, fault("L4014", "an array has no method %q", name)
}

func (c *callCtx) stringMethod(s string, name string, a []Value) (Value, error) {
	str := func(i int) (string, error) { return wantString(name, argAt(a, i)) }
	u := utf16Of(s)
	switch name {
	case "trim":
		return strings.TrimSpace(s), nil
	case "trimStart":
		return strings.TrimLeft(s, " \t\n\r\v\f\u00a0\ufeff"), nil
	case "trimEnd":
		return strings.TrimRight(s, " \t\n\r\v\f\u00a0\ufeff"), nil
	case "toLowerCase":
		return strings.ToLower(s), nil
	case "toUpperCase":
		return strings.ToUpper(s), nil
	case "startsWith", "endsWith", "includes", "indexOf", "lastIndexOf":
		p, err := str(0)
		if err != nil {
			return nil, err
		}
		switch name {
		case "startsWith":
			return strings.HasPrefix(s, p), nil
		case "endsWith":
			return strings.HasSuffix(s, p), nil
		case "includes":
			return strings.Contains(s, p), nil
		}
		pu := utf16Of(p)
		idx := -1
		for i := 0; i+len(pu) <= len(u); i++ {
			if equalU16(u[i:i+len(pu)], pu) {
				idx = i
				if name == "indexOf" {
					break
				}
			}
		}
		return float64(idx), nil
	case "slice", "substring":
		idx := relIndex
		if name == "substring" {
			idx = clampIndex
		}
		st, err := idx(argAt(a, 0), len(u), 0)
		if err != nil {
			return nil, err
		}
		en, err := idx(argAt(a, 1), len(u), len(u))
		if err != nil {
			return nil, err
		}
		if name == "substring" && en < st {
			st, en = en, st
		}
		if en < st {
			return "", nil
		}
		return fromUTF16(u[st:en]), nil
	case "split":
		sep, err := str(0)
		if err != nil {
			return nil, err
		}
		var out []Value
		if sep == "" {
			for _, x := range u {
				out = append(out, fromUTF16([]uint16{x}))
			}
		} else {
			for _, p := range strings.Split(s, sep) {
				out = append(out, p)
			}
		}
		return c.arr(out), nil
	case "replace", "replaceAll":
		from, err := str(0)
		if err != nil {
			return nil, err
		}
		to, err := str(1)
		if err != nil {
			return nil, err
		}
		n := 1
		if name == "replaceAll" {
			n = -1
		}
		return replaceSubst(s, from, to, n), nil
	case "repeat":
		n, err := wantNum("repeat", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		if n < 0 || math.IsInf(n, 0) || n*float64(len(s)) > 1<<24 {
			return nil, fault("L4016", "repeat: invalid count")
		}
		return strings.Repeat(s, int(n)), nil
	case "padStart", "padEnd":
		n, err := wantNum(name, argAt(a, 0))
		if err != nil {
			return nil, err
		}
		fill := " "
		if argAt(a, 1) != Undefined {
			if fill, err = str(1); err != nil {
				return nil, err
			}
		}
		need := int(n) - len(u)
		if need <= 0 || fill == "" || n > 1<<24 {
			return s, nil
		}
		fu := utf16Of(fill)
		var pad []uint16
		for len(pad) < need {
			pad = append(pad, fu...)
		}
		pad = pad[:need]
		if name == "padStart" {
			return fromUTF16(pad) + s, nil
		}
		return s + fromUTF16(pad), nil
	case "at", "charAt":
		f, err := wantNum(name, argAt(a, 0))
		if err != nil {
			return nil, err
		}
		i := int(math.Trunc(f))
		if name == "at" && i < 0 {
			i += len(u)
		}
		if i < 0 || i >= len(u) {
			if name == "at" {
				return Undefined, nil
			}
			return "", nil
		}
		return fromUTF16(u[i : i+1]), nil
	case "concat":
		var b strings.Builder
		b.WriteString(s)
		for i := range a {
			p, err := str(i)
			if err != nil {
				return nil, err
			}
			b.WriteString(p)
		}
		return b.String(), nil
	}
	return nil, fault("L4014", "a string has no method %q", name)
}

func equalU16(a, b []uint16) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// replaceSubst replaces n occurrences (-1: all) with ECMAScript's
// substitution patterns $$, $&, $` and $'.
func replaceSubst(s, from, to string, n int) string {
	var b strings.Builder
	rest, done, pos := s, 0, 0
	for n < 0 || done < n {
		i := strings.Index(rest, from)
		if i < 0 {
			break
		}
		at := pos + i
		b.WriteString(rest[:i])
		for j := 0; j < len(to); j++ {
			if to[j] == '$' && j+1 < len(to) {
				switch to[j+1] {
				case '$':
					b.WriteByte('$')
					j++
					continue
				case '&':
					b.WriteString(from)
					j++
					continue
				case '`':
					b.WriteString(s[:at])
					j++
					continue
				case '\'':
					b.WriteString(s[at+len(from):])
					j++
					continue
				}
			}
			b.WriteByte(to[j])
		}
		adv := i + len(from)
		if from == "" {
			if i >= len(rest) {
				rest = ""
				break
			}
			_, w := utf8.DecodeRuneInString(rest[i:])
			b.WriteString(rest[i : i+w])
			adv = i + w
		}
		rest, pos = rest[adv:], pos+adv
		done++
	}
	b.WriteString(rest)
	return b.String()
}

func numberMethod(f float64, name string, a []Value) (Value, error) {
	switch name {
	case "toString":
		if v := argAt(a, 0); v != Undefined {
			radix, err := wantNum("toString", v)
			if err != nil {
				return nil, err
			}
			if radix != 10 {
				if radix < 2 || radix > 36 || f != math.Trunc(f) {
					return nil, fault("L4016", "toString: only whole numbers take a radix other than 10")
				}
				return strconv.FormatInt(int64(f), int(radix)), nil
			}
		}
		return numStr(f), nil
	case "toFixed":
		d, err := wantNum("toFixed", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		if d < 0 || d > 100 {
			return nil, fault("L4016", "toFixed takes 0 to 100 digits")
		}
		if math.Abs(f) >= 1e21 || math.IsNaN(f) {
			return numStr(f), nil
		}
		return toFixed(f, int(d)), nil
	case "toPrecision":
		if argAt(a, 0) == Undefined {
			return numStr(f), nil
		}
		p, err := wantNum("toPrecision", argAt(a, 0))
		if err != nil {
			return nil, err
		}
		if p < 1 || p > 100 {
			return nil, fault("L4016", "toPrecision takes 1 to 100 digits")
		}
		return toPrecision(f, int(p)), nil
	}
	return nil, fault("L4014", "a number has no method %q", name)
}

// toPrecision formats as ECMAScript's Number.prototype.toPrecision: p
// significant digits, in exponent form when the exponent is below -6 or at
// least p.
func toPrecision(f float64, p int) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return numStr(f)
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	m, expS, _ := strings.Cut(strconv.FormatFloat(f, 'e', p-1, 64), "e")
	digits := strings.Replace(m, ".", "", 1)
	e, _ := strconv.Atoi(expS)
	if f == 0 {
		e = 0
	}
	if e < -6 || e >= p {
		out := digits[:1]
		if p > 1 {
			out += "." + digits[1:]
		}
		if e >= 0 {
			return sign + out + "e+" + strconv.Itoa(e)
		}
		return sign + out + "e-" + strconv.Itoa(-e)
	}
	if e >= 0 {
		if e+1 >= p {
			return sign + digits
		}
		return sign + digits[:e+1] + "." + digits[e+1:]
	}
	return sign + "0." + strings.Repeat("0", -e-1) + digits
}

// toFixed formats as ECMAScript's Number.prototype.toFixed: the exact binary
// value rounded to d decimals, a tie going to the larger magnitude.
func toFixed(f float64, d int) string {
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	exact := new(big.Float).SetFloat64(f).Text('f', 1100) // a float64 expands exactly in fewer digits
	intPart, frac, _ := strings.Cut(exact, ".")
	frac += strings.Repeat("0", d+1)
	digits := []byte(intPart + frac[:d])
	if frac[d] >= '5' {
		i := len(digits) - 1
		for ; i >= 0; i-- {
			if digits[i] == '9' {
				digits[i] = '0'
				continue
			}
			digits[i]++
			break
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		}
	}
	n := len(digits) - d
	out := string(digits[:n])
	if d > 0 {
		out += "." + string(digits[n:])
	}
	return sign + out
}
