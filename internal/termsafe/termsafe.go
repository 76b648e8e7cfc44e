// Package termsafe makes text that came from the mesh safe to print on a terminal or in a
// log line. A peer chooses its message text, its display name, role and activity, channel
// descriptions and message ids; printed raw, an ESC, OSC, BEL or C1 sequence in any of them
// could move the cursor, recolour or clear the screen, set the window title or hide text, a
// bidi override could reorder what a reader sees, and a line break could start a line that
// looks like another sender's message. Escape keeps the text readable and one line long.
package termsafe

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r must never reach a terminal raw:
//
//   - every C0 control (U+0000 to U+001F: NUL, BEL, BS, TAB, LF, CR, ESC, ...), DEL
//     (U+007F) and every C1 control (U+0080 to U+009F, such as U+009B, which some
//     terminals take for CSI);
//   - every format character (Unicode category Cf): the bidi marks, embeddings, overrides
//     and isolates (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), the
//     invisible ones (zero-width space U+200B, word joiner U+2060, soft hyphen U+00AD,
//     the byte-order mark U+FEFF) and the tag characters (U+E0000 to U+E007F), which
//     can hide text; except the zero-width non-joiner and joiner (U+200C, U+200D),
//     which scripts and emoji sequences need and which move nothing;
//   - the line and paragraph separators (U+2028, U+2029).
//
// A tab is unsafe too: it moves the cursor to the next tab stop, so it could misalign a
// column or push text out of sight; a tab in a message shows as \t.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return true
	case r < 0xa0:
		return false
	case r == '\u200c' || r == '\u200d':
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Escape returns s with every unsafe rune (see Unsafe) and every byte that is not valid
// UTF-8 turned into a visible escape: \n for a line break (and for CR LF), \r and \t, \xHH
// for another ASCII control and an invalid byte, \uHHHH or \UHHHHHHHH for the others.
// Everything else (letters of any script, emoji, punctuation, a backslash) is kept as it
// is, so s prints on one line and cannot move the cursor, change colours or start a line.
//
// The escapes are for reading, not for decoding: a peer may write the six characters
// \u202e itself. The exact text is in the --json output.
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteString(`\n`)
			size = 2
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case !Unsafe(r):
			b.WriteString(s[i : i+size])
		case r < 0x80:
			writeHex(&b, `\x`, uint32(r), 2)
		case r <= 0xffff:
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			writeHex(&b, `\U`, uint32(r), 8)
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first unsafe rune or invalid byte of s, -1 if none.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

// writeHex writes prefix and v as digits lowercase hex digits.
func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[(v>>uint(shift))&0xf])
	}
}

// EscapeJSON returns JSON text, as encoding/json writes it, with every unsafe rune above
// U+001F written as a \uXXXX escape (a surrogate pair above U+FFFF) and every byte that is not
// UTF-8 as \ufffd, which a decoder reads as the same value. encoding/json escapes the C0
// controls and the line separators but writes DEL, the C1 controls and the bidi and
// other format characters raw; after EscapeJSON, `--json` output printed on a terminal
// cannot drive it either, and the decoded strings are exactly the peer's.
func EscapeJSON(b []byte) []byte {
	i := firstUnsafe(string(b))
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = appendU(out, utf8.RuneError)
		case r < 0x20 || !Unsafe(r): // a raw C0 byte in such JSON is white space between tokens
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = appendU(appendU(out, r1), r2)
		default:
			out = appendU(out, r)
		}
		i += size
	}
	return out
}

// appendU appends the JSON escape \uHHHH of the UTF-16 code unit r.
func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}
