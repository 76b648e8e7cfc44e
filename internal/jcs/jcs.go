// Package jcs is the JSON Canonicalization Scheme of RFC 8785: object keys sorted by
// UTF-16 code units, no whitespace, ECMAScript number and string forms. Hashes that another
// implementation must reproduce (the manager's contract digests, Cotal Lang's program and
// input hashes) are taken over these bytes.
package jcs

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Canonical returns the canonical form of a JSON value tree: nil, bool, a finite number
// (float64, int, int64 or json.Number), string, []any and map[string]any of these.
// Anything else has no canonical form and is an error naming its path inside the value.
func Canonical(v any) ([]byte, error) {
	var b strings.Builder
	if err := writeCanonical(&b, v, "$"); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// Marshal returns the canonical form of v, any value encoding/json accepts.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return Canonical(tree)
}

func writeCanonical(b *strings.Builder, v any, path string) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case float64:
		s, err := Number(x)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		b.WriteString(s)
	case int:
		return writeCanonical(b, float64(x), path)
	case int64:
		return writeCanonical(b, float64(x), path)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("%s: number %q: %w", path, x, err)
		}
		return writeCanonical(b, f, path)
	case string:
		writeCanonicalString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortUTF16(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k], path+"."+k); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("%s: a %T has no canonical form", path, v)
	}
	return nil
}

// sortUTF16 orders keys by their UTF-16 code units, as RFC 8785 §3.2.3 asks.
func sortUTF16(keys []string) {
	sort.Slice(keys, func(i, j int) bool { return Less(keys[i], keys[j]) })
}

// Less orders two strings by their UTF-16 code units (RFC 8785 §3.2.3).
func Less(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func writeCanonicalString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// Number formats a finite number as ECMAScript's Number::toString does,
// which is the number form RFC 8785 prescribes.
func Number(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("the number %v is not finite", f)
	}
	if f == 0 {
		return "0", nil
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, expS, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expS)
	k, n := len(digits), exp+1
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		if n-1 >= 0 {
			out += "e+" + strconv.Itoa(n-1)
		} else {
			out += "e-" + strconv.Itoa(1-n)
		}
	}
	return sign + out, nil
}
