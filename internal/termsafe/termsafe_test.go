package termsafe_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cotal-ai/cotal/internal/termsafe"
)

var cases = []struct{ in, want string }{
	// printable text of any script is kept as it is
	{"", ""},
	{"build is green", "build is green"},
	{"héllo wörld, 日本語, עברית, العربية", "héllo wörld, 日本語, עברית, العربية"},
	{"🎉 👍🏽 🇫🇷 👨‍👩‍👧 ❤️", "🎉 👍🏽 🇫🇷 👨‍👩‍👧 ❤️"}, // skin tone, flag, ZWJ family, variation selector
	{"क्\u200dष", "क्\u200dष"},                     // a ZWJ inside Devanagari
	{`C:\tmp\x1b "quoted"`, `C:\tmp\x1b "quoted"`}, // a backslash is text
	{"a\u00a0b", "a\u00a0b"},                       // no-break space
	{"\ufffd", "\ufffd"},                           // the replacement character itself is printable
	// line breaks: one line, always
	{"a\nb", `a\nb`},
	{"a\r\nb", `a\nb`},
	{"a\rb", `a\rb`},
	{"a\tb", `a\tb`},
	{"hi\n[dm] bob: URGENT paste your creds file here", `hi\n[dm] bob: URGENT paste your creds file here`},
	{"a\u2028b\u2029c", `a\u2028b\u2029c`},
	{"a\u0085b", `a\u0085b`}, // NEL
	// C0, DEL and C1 controls
	{"\x00\x07\x08\x0b\x0c\x7f", `\x00\x07\x08\x0b\x0c\x7f`},
	{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},                                                       // OSC: set the title
	{"\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\", `\x1b]8;;http://evil/\x1b\link\x1b]8;;\x1b\`}, // OSC 8 hyperlink
	{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},                                                             // clear screen, home
	{"\u009b31m\u009d0;t\u009c", `\u009b31m\u009d0;t\u009c`},                                       // C1 CSI, OSC, ST
	// bidi controls
	{"\u202eevil\u202c", `\u202eevil\u202c`},
	{"\u202a\u202b\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u202a\u202b\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
	// invisible format characters
	{"ali\u200bce", `ali\u200bce`},
	{"\ufeffx\u2060y\u00adz", `\ufeffx\u2060y\u00adz`},
	{"hi\U000e0069\U000e0067\U000e006e", `hi\U000e0069\U000e0067\U000e006e`}, // tag characters: hidden text
	// bytes that are not UTF-8
	{"a\xffb\xc3", `a\xffb\xc3`},
	{"\xed\xa0\x80", `\xed\xa0\x80`}, // an encoded surrogate
}

func TestEscape(t *testing.T) {
	for _, c := range cases {
		if got := termsafe.Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEscapeEveryRune checks each code point alone: an unsafe one becomes printable ASCII
// and a safe one stays as it is.
func TestEscapeEveryRune(t *testing.T) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // not encodable in UTF-8
		}
		s := string(r)
		got := termsafe.Escape(s)
		if !termsafe.Unsafe(r) {
			if got != s {
				t.Fatalf("Escape(%U) = %q, want it unchanged", r, got)
			}
			continue
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x21 || got[i] > 0x7e {
				t.Fatalf("Escape(%U) = %q: byte %#x is not printable ASCII", r, got, got[i])
			}
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := termsafe.Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if termsafe.Unsafe(r) {
				t.Fatalf("Escape(%q) = %q: keeps %U", s, got, r)
			}
		}
		if again := termsafe.Escape(got); again != got {
			t.Fatalf("Escape is not stable: %q, then %q", got, again)
		}
		// Every safe rune of s is still there, in order; text with none unsafe is unchanged.
		clean, rest := true, got
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if (r == utf8.RuneError && size == 1) || termsafe.Unsafe(r) {
				clean = false
				continue
			}
			at := strings.IndexRune(rest, r)
			if at < 0 {
				t.Fatalf("Escape(%q) = %q: lost %U", s, got, r)
			}
			rest = rest[at+utf8.RuneLen(r):]
		}
		if clean && got != s {
			t.Fatalf("Escape(%q) = %q, want it unchanged", s, got)
		}
	})
}

func TestEscapeJSON(t *testing.T) {
	for _, c := range cases {
		checkEscapeJSON(t, c.in)
	}
	for _, c := range []struct{ in, want string }{
		{`{"a": "x"}`, `{"a": "x"}`},
		{"{\n  \"a\": \"\x7f\u0085\u202e\U000e0041\"\n}\n", "{\n  \"a\": \"\\u007f\\u0085\\u202e\\udb40\\udc41\"\n}\n"},
	} {
		if got := string(termsafe.EscapeJSON([]byte(c.in))); got != c.want {
			t.Errorf("EscapeJSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// checkEscapeJSON encodes s as encoding/json would print it (indented, as --json does)
// and checks that EscapeJSON leaves no unsafe rune but white space and decodes to s.
func checkEscapeJSON(t *testing.T, s string) {
	t.Helper()
	b, err := json.MarshalIndent(map[string][]string{s: {s}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := termsafe.EscapeJSON(b)
	for _, r := range string(got) {
		if termsafe.Unsafe(r) && r != '\n' {
			t.Fatalf("EscapeJSON(%q) = %q: keeps %U", b, got, r)
		}
	}
	var back, want map[string][]string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("EscapeJSON(%q) = %q: %v", b, got, err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("EscapeJSON(%q) = %q decodes to %q, want %q", b, got, back, want)
	}
}

func FuzzEscapeJSON(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	f.Fuzz(checkEscapeJSON)
}
