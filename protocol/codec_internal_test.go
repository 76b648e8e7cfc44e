package protocol

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// The hand-written codec must agree with encoding/json exactly: EncodeMessage writes the
// bytes json.Marshal writes, and decodeCanonical, whenever it accepts, returns what
// decodeReflect (encoding/json) returns.

// checkEncode fails t unless EncodeMessage(m) is json.Marshal(m), errors included.
func checkEncode(t *testing.T, m *Message) {
	t.Helper()
	want, werr := json.Marshal(m)
	got, gerr := EncodeMessage(m)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("EncodeMessage(%+v) error %v, json.Marshal error %v", m, gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeMessage(%+v) =\n%s\njson.Marshal =\n%s", m, got, want)
	}
}

// checkDecode fails t when decodeCanonical accepts data and differs from decodeReflect.
func checkDecode(t *testing.T, data []byte) bool {
	t.Helper()
	if !utf8.Valid(data) {
		return false
	}
	got, ok := decodeCanonical(data)
	if !ok {
		return false
	}
	want, err := decodeReflect(data)
	if err != nil {
		t.Fatalf("decodeCanonical accepted %q, encoding/json refuses it: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeCanonical(%q) =\n%#v\nencoding/json =\n%#v", data, got, want)
	}
	return true
}

var fuzzRunes = []string{"a", "Z", "0", " ", ".", "_", "-", `"`, `\`, "/", "<", ">", "&", "\n", "\r", "\t",
	"\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80"}

func randString(r *rand.Rand) string {
	var b strings.Builder
	for range r.Intn(12) {
		b.WriteString(fuzzRunes[r.Intn(len(fuzzRunes))])
	}
	return b.String()
}

func randMessage(r *rand.Rand) *Message {
	opt := func() string {
		if r.Intn(2) == 0 {
			return ""
		}
		return randString(r)
	}
	m := &Message{ID: randString(r), TS: r.Int63() - r.Int63(), Space: randString(r),
		From:    EndpointRef{ID: randString(r), Name: randString(r), Role: opt()},
		Channel: opt(), To: opt(), ToService: opt(), ReplyTo: opt(), ContextID: opt()}
	switch r.Intn(3) {
	case 1:
		m.Mentions = []string{}
	case 2:
		for range 1 + r.Intn(3) {
			m.Mentions = append(m.Mentions, randString(r))
		}
	}
	if r.Intn(8) != 0 {
		m.Parts = []Part{}
		for range r.Intn(4) {
			switch r.Intn(6) {
			case 0:
				m.Parts = append(m.Parts, Part{Kind: PartData, Data: json.RawMessage(`{"a": [1, "<&>"], "b":null}`)})
			case 1:
				m.Parts = append(m.Parts, Part{Kind: PartArtifact, Name: randString(r), MediaType: "text/plain", Digest: "sha256:00", Size: r.Int63()})
			case 2:
				m.Parts = append(m.Parts, Part{Kind: "com.example.x", Raw: json.RawMessage(`{"kind":"com.example.x", "v":"<\u2028>"}`)})
			case 3:
				m.Parts = append(m.Parts, Part{Kind: PartData}) // fails to encode
			default:
				m.Parts = append(m.Parts, TextPart(randString(r)))
			}
		}
	}
	return m
}

func TestEncodeMessageMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	accepted := 0
	for range 100000 {
		m := randMessage(r)
		checkEncode(t, m)
		if b, err := json.Marshal(m); err == nil && checkDecode(t, b) {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("decodeCanonical accepted no encoded message")
	}
}

func TestDecodeCanonicalMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{"id":"x","from":{"id":"a.b","name":"n"},"parts":[{"kind":"text","text":"hi"}]}`,
		` {"id":"x","ts":-0,"from":{},"parts":[]} `,
		`{"id":"x","ts":12,"from":{"id":"a.b"},"mentions":[],"parts":[{"kind":"text"}]}`,
		`{"id":"x","from":{"id":"a.b"},"mentions":["a","b"]}`,
		`{"id":"x\n\"\\\/\b\f\r\t","from":{"id":"a.b"}}`,
		`{"id":"x","ts":9223372036854775807,"from":{"id":"a.b"}}`,
		`{"id":"x","ts":9223372036854775808,"from":{"id":"a.b"}}`,
		`{"id":"x","ts":1.5,"from":{"id":"a.b"}}`,
		`{"id":"x","ts":01,"from":{"id":"a.b"}}`,
		`{"id":"x","id":"y","from":{"id":"a.b"}}`,
		`{"ID":"x","from":{"id":"a.b"}}`,
		`{"id":"x","from":{"id":"a.b"},"parts":[{"kind":"data","data":1}]}`,
		`{"id":"x","from":{"id":"a.b"}} x`,
		`{"id":"x","from":{"id":"a.b"},}`,
		`{"id":"\u0041","from":{"id":"a.b"}}`,
		`{"id":null,"from":{"id":"a.b"}}`,
		`{"id":"x","from":{"id":"a.b"}`,
		`{"id":"x"}`,
	}
	for _, c := range cases {
		checkDecode(t, []byte(c))
	}
}

func FuzzEncodeMessage(f *testing.F) {
	f.Add(int64(1), "id", "sp", "a.b", "n", "", "ch", "", "", "m", "hi", "", "")
	f.Add(int64(-5), "<&>", "\u2028", "\xff", "\x00\n", "r", "", "x", "", "", "\"\\", "\t", "\x7f")
	f.Fuzz(func(t *testing.T, ts int64, id, space, fromID, name, role, ch, to, svc, mention, text, replyTo, ctx string) {
		m := &Message{ID: id, TS: ts, Space: space, From: EndpointRef{ID: fromID, Name: name, Role: role},
			Channel: ch, To: to, ToService: svc, Parts: []Part{TextPart(text), TextPart(mention + text)},
			ReplyTo: replyTo, ContextID: ctx}
		if mention != "" {
			m.Mentions = []string{mention, text}
		}
		checkEncode(t, m)
		b, _ := json.Marshal(m)
		checkDecode(t, b)
	})
}

func FuzzDecodeCanonical(f *testing.F) {
	r := rand.New(rand.NewSource(2))
	for range 50 {
		if b, err := json.Marshal(randMessage(r)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"id":"x","ts":12,"from":{"id":"a.b"},"mentions":[],"parts":[{"kind":"text","text":"a\nb"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		// DecodeMessage is decodeReflect's answer whatever path it takes.
		got, gerr := DecodeMessage(data)
		var want Message
		var werr error
		if !utf8.Valid(data) {
			werr = gerr
		} else {
			want, werr = decodeReflect(data)
		}
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeMessage(%q) = %#v, %v; encoding/json: %#v, %v", data, got, gerr, want, werr)
		}
	})
}

func TestDecodeCanonicalEscapes(t *testing.T) {
	for _, c := range []string{`\u0041`, `\u003c\u0026\u003E`, `\ud83d\ude00`, `\ud83d`, `\ud83dx`, `\ud83d\u0041`,
		`\ude00\ud83d`, `\ud83d\ud83d\ude00`, `\u00zz`, `\ud83d\u00zz`, `\u2028\ufffd`, `\u00`, `\x`} {
		checkDecode(t, []byte(`{"id":"`+c+`","from":{"id":"a.b","name":"`+c+`"}}`))
	}
	if !checkDecode(t, []byte(`{"id":"\u003c\ud83d\ude00","from":{"id":"a.b"}}`)) {
		t.Fatal("decodeCanonical refused \\u escapes")
	}
}

func TestPrincipalIs(t *testing.T) {
	ps := []Principal{{"a", "b"}, {"", "b"}, {"a", ""}, {"", ""}, {"a.b", "c"}, {"a", "b.c"}, {"ab", "c"}}
	ids := []string{"a.b", ".b", "a.", ".", "a.b.c", "ab.c", "abc", "", "a-b", "b.a"}
	for _, p := range ps {
		for _, id := range ids {
			if got, want := p.is(id), id == p.String(); got != want {
				t.Errorf("%#v.is(%q) = %v, want %v", p, id, got, want)
			}
		}
	}
}

// A part that cannot be encoded fails EncodeMessage with json.Marshal's own words, which
// its error path builds from a copy of the message.
func TestEncodeMessageErrorAsMarshal(t *testing.T) {
	for _, p := range []Part{{Kind: PartData}, {Kind: "com.example.x", Raw: json.RawMessage(`{"kind":`)}} {
		m := &Message{ID: "x", From: EndpointRef{ID: "a.b"}, To: "c.d", Parts: []Part{TextPart("t"), p}}
		if _, err := json.Marshal(m); err == nil {
			t.Fatalf("json.Marshal of part %+v did not fail", p)
		}
		checkEncode(t, m)
	}
}

// TestHTMLSafe: the bit test of appendString agrees, for every ASCII byte, with the
// rule it stands for.
func TestHTMLSafe(t *testing.T) {
	for b := range byte(utf8.RuneSelf) {
		want := b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
		if htmlSafe(b) != want {
			t.Errorf("htmlSafe(%#x) = %v, want %v", b, !want, want)
		}
	}
}

// TestPlainRun: the eight-byte skip of canon.str passes exactly the whole eight-byte runs
// before the first byte str stops at, for each byte value at each place of a string of
// each other byte value.
func TestPlainRun(t *testing.T) {
	stops := func(b byte) bool { return b == '"' || b == '\\' || b < 0x20 }
	buf := make([]byte, 19)
	for bg := range 256 {
		for v := range 256 {
			for at := range len(buf) {
				for i := range buf {
					buf[i] = byte(bg)
				}
				buf[at] = byte(v)
				s := string(buf)
				for from := range 3 {
					want := from
					for want+8 <= len(s) {
						clean := true
						for i := want; i < want+8; i++ {
							clean = clean && !stops(s[i])
						}
						if !clean {
							break
						}
						want += 8
					}
					if got := plainRun(s, from); got != want {
						t.Fatalf("plainRun(%q, %d) = %d, want %d", s, from, got, want)
					}
				}
			}
		}
	}
}
