package protocol

import (
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The hot path of every send and receive: a hand-written encoder that writes exactly the
// bytes json.Marshal writes for a Message, and a decoder for the canonical shape of an
// envelope (the shape any encoder of the spec writes) that yields exactly what
// json.Unmarshal would. Anything outside that shape goes to encoding/json unchanged.

// EncodeMessage returns the JSON of m, byte for byte what json.Marshal(m) returns, and
// fails where it fails.
func EncodeMessage(m *Message) ([]byte, error) {
	return AppendMessage(make([]byte, 0, 160+messageSize(m)), m)
}

// messageSize estimates the encoded size of m's variable parts.
func messageSize(m *Message) int {
	n := len(m.ID) + len(m.Space) + len(m.From.ID) + len(m.From.Name) + len(m.From.Role) +
		len(m.Channel) + len(m.To) + len(m.ToService) + len(m.ReplyTo) + len(m.ContextID)
	for _, s := range m.Mentions {
		n += len(s) + 3
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		n += len(p.Text) + len(p.Data) + len(p.Raw) + len(p.Name) + len(p.MediaType) + len(p.Digest) + 32
	}
	return n + n/8
}

// AppendMessage appends the JSON of m to dst, as EncodeMessage.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, m.TS, 10)
	dst = append(dst, `,"space":`...)
	dst = appendString(dst, m.Space)
	dst = append(dst, `,"from":{"id":`...)
	dst = appendString(dst, m.From.ID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, m.From.Name)
	if m.From.Role != "" {
		dst = append(dst, `,"role":`...)
		dst = appendString(dst, m.From.Role)
	}
	dst = append(dst, '}')
	dst = appendOptional(dst, `,"channel":`, m.Channel)
	dst = appendOptional(dst, `,"to":`, m.To)
	dst = appendOptional(dst, `,"toService":`, m.ToService)
	if len(m.Mentions) > 0 {
		dst = append(dst, `,"mentions":[`...)
		for i, s := range m.Mentions {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"parts":`...)
	if m.Parts == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range m.Parts {
			if i > 0 {
				dst = append(dst, ',')
			}
			p := &m.Parts[i]
			if p.Kind == PartText {
				dst = append(dst, `{"kind":"text","text":`...)
				dst = appendString(dst, p.Text)
				dst = append(dst, '}')
				continue
			}
			// Other kinds are rare: encoding/json writes them as it would inside m.
			b, err := json.Marshal(*p)
			if err != nil {
				cp := *m                  // a copy, so that m itself does not escape
				_, err = json.Marshal(cp) // the error exactly as json.Marshal(m) words it
				if err == nil {
					_, err = p.MarshalJSON()
				}
				return nil, err
			}
			dst = append(dst, b...)
		}
		dst = append(dst, ']')
	}
	dst = appendOptional(dst, `,"replyTo":`, m.ReplyTo)
	dst = appendOptional(dst, `,"contextId":`, m.ContextID)
	return append(dst, '}'), nil
}

func appendOptional(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendString(append(dst, key...), s)
}

const hexDigits = "0123456789abcdef"

// safeLow and safeHigh hold a bit per ASCII byte (0-63 and 64-127) that appendString
// writes as it is: 0x20 to 0x7F but ", \, <, > and &.
const (
	safeLow  uint64 = 0xFFFFFFFF00000000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>')
	safeHigh uint64 = ^uint64(0) &^ (1 << ('\\' - 64))
)

// htmlSafe reports whether ASCII byte b (below utf8.RuneSelf) is written unescaped: one
// bit test instead of six comparisons, on the loop every string of every send runs.
func htmlSafe(b byte) bool {
	if b < 64 {
		return safeLow>>b&1 != 0
	}
	return safeHigh>>(b-64)&1 != 0
}

// appendString writes s as encoding/json does with HTML escaping (json.Marshal's
// default): control characters, ", \, <, > and & escaped, invalid UTF-8 as \ufffd, and
// U+2028 and U+2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Field bits of decodeCanonical, to refuse a repeated key.
const (
	fID = 1 << iota
	fTS
	fSpace
	fFrom
	fChannel
	fTo
	fToService
	fMentions
	fParts
	fReplyTo
	fContextID
)

// canon reads the canonical shape of an envelope. Its strings are slices of one copy of
// the whole body.
type canon struct {
	s string
	i int
}

// decodeCanonical decodes data, which must be valid UTF-8, when it has the canonical
// shape: a JSON object whose keys are the envelope's own (spelled exactly, each at most
// once) with string, integer, string-array and text-part values, and no nulls. It then
// returns what decodeReflect returns for it, with ok; for any other data (which may still
// be a valid envelope) ok is false and decodeReflect decides.
func decodeCanonical(data []byte) (m Message, ok bool) {
	c := canon{s: string(data)}
	seen, ok := c.object(func(key string) (int, bool) {
		var ok bool
		switch key {
		case "id":
			m.ID, ok = c.str()
			return fID, ok
		case "ts":
			m.TS, ok = c.int()
			return fTS, ok
		case "space":
			m.Space, ok = c.str()
			return fSpace, ok
		case "from":
			m.From, ok = c.from()
			return fFrom, ok
		case "channel":
			m.Channel, ok = c.str()
			return fChannel, ok
		case "to":
			m.To, ok = c.str()
			return fTo, ok
		case "toService":
			m.ToService, ok = c.str()
			return fToService, ok
		case "mentions":
			m.Mentions, ok = c.strs()
			return fMentions, ok
		case "parts":
			m.Parts, ok = c.parts()
			return fParts, ok
		case "replyTo":
			m.ReplyTo, ok = c.str()
			return fReplyTo, ok
		case "contextId":
			m.ContextID, ok = c.str()
			return fContextID, ok
		}
		return 0, false
	})
	c.ws()
	if !ok || c.i != len(c.s) || seen&fID == 0 || seen&fFrom == 0 {
		return Message{}, false
	}
	if m.Parts == nil {
		m.Parts = []Part{} // as decodeReflect: a message without parts has an empty list
	}
	return m, true
}

// object reads a JSON object, handing each member's key to field, which reads the value
// and returns the key's bit (0 for a key it does not know) and whether the value read. An
// unknown key, a key given twice or a value that does not read fails the object; seen has
// the bits of the keys read.
func (c *canon) object(field func(key string) (bit int, ok bool)) (seen int, ok bool) {
	c.ws()
	if !c.eat('{') {
		return 0, false
	}
	c.ws()
	if c.eat('}') {
		return 0, true
	}
	for {
		c.ws()
		key, ok := c.str()
		if !ok {
			return 0, false
		}
		c.ws()
		if !c.eat(':') {
			return 0, false
		}
		c.ws()
		bit, ok := field(key)
		if !ok || bit == 0 || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		c.ws()
		if !c.eat(',') {
			return seen, c.eat('}')
		}
	}
}

func (c *canon) ws() {
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canon) peek() byte {
	if c.i < len(c.s) {
		return c.s[c.i]
	}
	return 0
}

func (c *canon) eat(b byte) bool {
	if c.i < len(c.s) && c.s[c.i] == b {
		c.i++
		return true
	}
	return false
}

// str reads a JSON string.
func (c *canon) str() (string, bool) {
	if !c.eat('"') {
		return "", false
	}
	start := c.i
	c.i = plainRun(c.s, c.i)
	for c.i < len(c.s) {
		b := c.s[c.i]
		switch {
		case b == '"':
			c.i++
			return c.s[start : c.i-1], true
		case b == '\\':
			return c.escaped(start)
		case b < 0x20:
			return "", false
		}
		c.i++
	}
	return "", false
}

// plainRun skips, eight bytes at a time, from i past every whole eight-byte run of s that
// holds no byte str stops at (", \ or a control character); str reads the rest byte by
// byte. The test of a run is exact: each of its three terms has a high bit set if and
// only if a byte of the run is below 0x20, is " or is \ (the subtraction borrows into
// a byte's high bit from the lowest such byte, and from no byte when there is none).
func plainRun(s string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(s); i += 8 {
		r := s[i : i+8]
		x := uint64(r[0]) | uint64(r[1])<<8 | uint64(r[2])<<16 | uint64(r[3])<<24 |
			uint64(r[4])<<32 | uint64(r[5])<<40 | uint64(r[6])<<48 | uint64(r[7])<<56
		q, b := x^('"'*ones), x^('\\'*ones)
		if ((x-0x20*ones)&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0 {
			break
		}
	}
	return i
}

// escaped finishes a string begun at start whose escape is at c.i.
func (c *canon) escaped(start int) (string, bool) {
	buf := make([]byte, 0, c.i-start+16)
	buf = append(buf, c.s[start:c.i]...)
	for c.i < len(c.s) {
		b := c.s[c.i]
		switch {
		case b == '"':
			c.i++
			return string(buf), true
		case b < 0x20:
			return "", false
		case b == '\\':
			if c.i+1 >= len(c.s) {
				return "", false
			}
			switch e := c.s[c.i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u': // as encoding/json: a bad surrogate pair reads as U+FFFD
				rr := getu4(c.s[c.i:])
				if rr < 0 {
					return "", false
				}
				c.i += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(c.s[c.i:])); dec != unicode.ReplacementChar {
						c.i += 6
						buf = utf8.AppendRune(buf, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				buf = utf8.AppendRune(buf, rr)
				continue
			default:
				return "", false
			}
			c.i += 2
			continue
		default:
			buf = append(buf, b)
		}
		c.i++
	}
	return "", false
}

// getu4 reads the \uXXXX escape at the start of s, or returns -1.
func getu4(s string) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range []byte(s[2:6]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// int reads a JSON integer that fits an int64.
func (c *canon) int() (int64, bool) {
	start := c.i
	c.eat('-')
	switch d := c.peek(); {
	case d == '0':
		c.i++
	case d >= '1' && d <= '9':
		for c.i < len(c.s) && c.s[c.i] >= '0' && c.s[c.i] <= '9' {
			c.i++
		}
	default:
		return 0, false
	}
	if d := c.peek(); d == '.' || d == 'e' || d == 'E' || (d >= '0' && d <= '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(c.s[start:c.i], 10, 64)
	return n, err == nil
}

// from reads a sender object of id, name and role.
func (c *canon) from() (r EndpointRef, ok bool) {
	_, ok = c.object(func(key string) (int, bool) {
		var ok bool
		switch key {
		case "id":
			r.ID, ok = c.str()
			return 1, ok
		case "name":
			r.Name, ok = c.str()
			return 2, ok
		case "role":
			r.Role, ok = c.str()
			return 4, ok
		}
		return 0, false
	})
	return r, ok
}

// strs reads an array of strings.
func (c *canon) strs() ([]string, bool) {
	if !c.eat('[') {
		return nil, false
	}
	out := []string{}
	c.ws()
	if c.eat(']') {
		return out, true
	}
	for {
		c.ws()
		s, ok := c.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		c.ws()
		if c.eat(',') {
			continue
		}
		return out, c.eat(']')
	}
}

// parts reads an array of text parts, each of kind and text only.
func (c *canon) parts() ([]Part, bool) {
	if !c.eat('[') {
		return nil, false
	}
	out := make([]Part, 0, 1)
	c.ws()
	if c.eat(']') {
		return out, true
	}
	for {
		c.ws()
		p, ok := c.textPart()
		if !ok {
			return nil, false
		}
		out = append(out, p)
		c.ws()
		if c.eat(',') {
			continue
		}
		return out, c.eat(']')
	}
}

func (c *canon) textPart() (p Part, ok bool) {
	seen, ok := c.object(func(key string) (int, bool) {
		var ok bool
		switch key {
		case "kind":
			p.Kind, ok = c.str()
			return 1, ok && p.Kind == PartText
		case "text":
			p.Text, ok = c.str()
			return 2, ok
		}
		return 0, false
	})
	return p, ok && seen&1 != 0
}
