package lang

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/dop251/goja/token"
)

func isNullish(v Value) bool { return v == nil || v == Undefined }

func isContainer(v Value) bool {
	switch v.(type) {
	case *Array, *Record, *Closure, *Builtin, *method:
		return true
	}
	return false
}

func numStr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s, _ := NumberString(f)
	return s
}

// toStr is ECMAScript's ToString over primitives; a container is L4018.
func toStr(v Value, where string) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		return numStr(x), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case nil:
		return "null", nil
	case undefinedType:
		return "undefined", nil
	}
	return "", fault("L4018", "%s: a %s does not convert to a string", where, kindOf(v))
}

// toNum is ECMAScript's ToNumber over primitives; a container is L4018.
func toNum(v Value, where string) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case nil:
		return 0, nil
	case undefinedType:
		return math.NaN(), nil
	case string:
		return strToNum(x), nil
	}
	return 0, fault("L4018", "%s: a %s does not convert to a number", where, kindOf(v))
}

func strToNum(s string) float64 {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0
	}
	switch t {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X' || t[1] == 'o' || t[1] == 'O' || t[1] == 'b' || t[1] == 'B') {
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[t[1]]
		n, err := strconv.ParseUint(t[2:], base, 64)
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}
	for _, r := range t {
		if !(r >= '0' && r <= '9' || r == '.' || r == 'e' || r == 'E' || r == '+' || r == '-') {
			return math.NaN()
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f
		}
		return math.NaN()
	}
	return f
}

func truthy(v Value) bool {
	switch x := v.(type) {
	case nil, undefinedType:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

func kindOf(v Value) string {
	switch v.(type) {
	case nil:
		return "null"
	case undefinedType:
		return "undefined"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case *Array:
		return "array"
	case *Record:
		return "record"
	}
	return "function"
}

func typeOf(v Value) string {
	switch v.(type) {
	case nil, *Array, *Record:
		return "object"
	case undefinedType:
		return "undefined"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	}
	return "function"
}

func strictEqual(a, b Value) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case undefinedType:
		return b == Undefined
	}
	return a == b
}

func toInt32(f float64) int32 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int32(uint32(int64(math.Trunc(math.Mod(f, 4294967296)))))
}

func toUint32(f float64) uint32 { return uint32(toInt32(f)) }

// binary applies an admitted binary operator (LANG §4.5).
func binary(op token.Token, a, b Value) (Value, error) {
	switch op {
	case token.STRICT_EQUAL:
		return strictEqual(a, b), nil
	case token.STRICT_NOT_EQUAL:
		return !strictEqual(a, b), nil
	}
	if isContainer(a) || isContainer(b) {
		return nil, fault("L4018", "the operator %s does not take a %s", op, kindOf(pickContainer(a, b)))
	}
	switch op {
	case token.PLUS:
		_, as := a.(string)
		_, bs := b.(string)
		if as || bs {
			x, _ := toStr(a, "+")
			y, _ := toStr(b, "+")
			return x + y, nil
		}
	case token.LESS, token.LESS_OR_EQUAL, token.GREATER, token.GREATER_OR_EQUAL:
		as, aok := a.(string)
		bs, bok := b.(string)
		if aok && bok {
			c := compareUTF16(as, bs)
			switch op {
			case token.LESS:
				return c < 0, nil
			case token.LESS_OR_EQUAL:
				return c <= 0, nil
			case token.GREATER:
				return c > 0, nil
			}
			return c >= 0, nil
		}
	}
	x, _ := toNum(a, op.String())
	y, _ := toNum(b, op.String())
	switch op {
	case token.PLUS:
		return x + y, nil
	case token.MINUS:
		return x - y, nil
	case token.MULTIPLY:
		return x * y, nil
	case token.SLASH:
		return x / y, nil
	case token.REMAINDER:
		if math.IsInf(y, 0) && !math.IsInf(x, 0) {
			return x, nil
		}
		return math.Mod(x, y), nil
	case token.EXPONENT:
		if math.IsNaN(y) || (math.Abs(x) == 1 && math.IsInf(y, 0)) {
			return math.NaN(), nil
		}
		return math.Pow(x, y), nil
	case token.LESS:
		return x < y, nil
	case token.LESS_OR_EQUAL:
		return x <= y, nil
	case token.GREATER:
		return x > y, nil
	case token.GREATER_OR_EQUAL:
		return x >= y, nil
	case token.AND:
		return float64(toInt32(x) & toInt32(y)), nil
	case token.OR:
		return float64(toInt32(x) | toInt32(y)), nil
	case token.EXCLUSIVE_OR:
		return float64(toInt32(x) ^ toInt32(y)), nil
	case token.SHIFT_LEFT:
		return float64(toInt32(x) << (toUint32(y) & 31)), nil
	case token.SHIFT_RIGHT:
		return float64(toInt32(x) >> (toUint32(y) & 31)), nil
	case token.UNSIGNED_SHIFT_RIGHT:
		return float64(toUint32(x) >> (toUint32(y) & 31)), nil
	}
	return nil, fault("L4018", "the operator %s is not supported", op)
}

func pickContainer(a, b Value) Value {
	if isContainer(a) {
		return a
	}
	return b
}

func compareUTF16(a, b string) int {
	if a == b {
		return 0
	}
	if lessUTF16(a, b) {
		return -1
	}
	return 1
}

// compoundOp maps a compound assignment to its binary operator.
var compoundOp = map[token.Token]token.Token{
	token.ADD_ASSIGN: token.PLUS, token.SUBTRACT_ASSIGN: token.MINUS, token.MULTIPLY_ASSIGN: token.MULTIPLY,
	token.EXPONENT_ASSIGN: token.EXPONENT, token.QUOTIENT_ASSIGN: token.SLASH, token.REMAINDER_ASSIGN: token.REMAINDER,
	token.AND_ASSIGN: token.AND, token.OR_ASSIGN: token.OR, token.EXCLUSIVE_OR_ASSIGN: token.EXCLUSIVE_OR,
	token.SHIFT_LEFT_ASSIGN: token.SHIFT_LEFT, token.SHIFT_RIGHT_ASSIGN: token.SHIFT_RIGHT,
	token.UNSIGNED_SHIFT_RIGHT_ASSIGN: token.UNSIGNED_SHIFT_RIGHT,
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

func utf16Of(s string) []uint16 { return utf16.Encode([]rune(s)) }

func fromUTF16(u []uint16) string { return string(utf16.Decode(u)) }

// display renders a value for a log line or a message.
func display(v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case *Closure, *Builtin, *method:
		return "[function]"
	}
	c, err := toCanon(v, "$", map[any]bool{})
	if err != nil {
		s, _ := toStr(v, "")
		if s == "" {
			return "[" + kindOf(v) + "]"
		}
		return s
	}
	b, _ := Canonical(c)
	return string(b)
}
