package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// sampleMulticast is the SPEC §12 sample message (wire-protocol.md §5).
const sampleMulticast = `{"id":"018f1d0a-0000-7000-9000-000000000001","ts":1710000000000,"space":"main",
 "from":{"id":"u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice","name":"alice","role":"planner"},
 "channel":"team.backend","mentions":["bob"],
 "parts":[{"kind":"text","text":"Can you review this?"}],"contextId":"ctx-1"}`

// sampleUnicast differs from sampleMulticast only in routing.
var sampleUnicast = strings.Replace(sampleMulticast, `"channel":"team.backend"`, `"to":"u_bbbbbbbbbbbbbbbbbbbbbbbbbb.bob"`, 1)

var digestA = "sha256:" + strings.Repeat("0123456789abcdef", 4)

func sampleMessage() protocol.Message {
	return protocol.Message{
		ID:        "018f1d0a-0000-7000-9000-000000000001",
		TS:        1710000000000,
		Space:     "main",
		From:      protocol.EndpointRef{ID: ownerA + ".alice", Name: "alice", Role: "planner"},
		Channel:   "team.backend",
		Mentions:  []string{"bob"},
		Parts:     []protocol.Part{protocol.TextPart("Can you review this?")},
		ContextID: "ctx-1",
	}
}

func TestDecodeSpecSample(t *testing.T) {
	got, err := protocol.DecodeMessage([]byte(sampleMulticast))
	if err != nil {
		t.Fatalf("DecodeMessage(sample): %v", err)
	}
	want := sampleMessage()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeMessage(sample) =\n%+v\nwant\n%+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("sample does not validate: %v", err)
	}
	if got.Text() != "Can you review this?" {
		t.Errorf("Text() = %q", got.Text())
	}

	uni, err := protocol.DecodeMessage([]byte(sampleUnicast))
	if err != nil {
		t.Fatalf("DecodeMessage(unicast sample): %v", err)
	}
	want.Channel, want.To = "", ownerB+".bob"
	if !reflect.DeepEqual(uni, want) {
		t.Errorf("DecodeMessage(unicast sample) =\n%+v\nwant\n%+v", uni, want)
	}
	if err := uni.Validate(); err != nil {
		t.Errorf("unicast sample does not validate: %v", err)
	}
}

func TestDecodeIgnoresUnknownFields(t *testing.T) {
	in := `{"id":"m1","ts":1,"space":"main","x-future":{"a":[1,2,{"b":null}]},"headers":null,
		"from":{"id":"` + ownerA + `.alice","name":"alice","avatar":"https://x","caps":{"y":1}},
		"toService":"reviewer","replyTo":"m0","v":2,
		"parts":[
			{"kind":"text","text":"hi","metadata":{"k":"v"}},
			{"kind":"data","data":{"n":1},"schema":"s"},
			{"kind":"artifact","name":"r.pdf","mediaType":"application/pdf","digest":"` + digestA + `","size":3,"url":"https://elsewhere"}
		]}`
	got, err := protocol.DecodeMessage([]byte(in))
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	want := protocol.Message{
		ID: "m1", TS: 1, Space: "main",
		From:      protocol.EndpointRef{ID: ownerA + ".alice", Name: "alice"},
		ToService: "reviewer", ReplyTo: "m0",
		Parts: []protocol.Part{
			protocol.TextPart("hi"),
			{Kind: protocol.PartData, Data: json.RawMessage(`{"n":1}`)},
			{Kind: protocol.PartArtifact, Name: "r.pdf", MediaType: "application/pdf", Digest: digestA, Size: 3},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeMessage =\n%+v\nwant\n%+v", got, want)
	}
}

// decodeCases feeds TestDecodeMessage and seeds FuzzDecodeMessage.
var decodeCases = []struct {
	name string
	in   string
	ok   bool
}{
	{"spec sample", sampleMulticast, true},
	{"spec unicast", sampleUnicast, true},
	{"empty id", `{"id":"","from":{"id":"local.a"},"channel":"c","parts":[]}`, true},
	{"surrounding space", " \n\t{\"id\":\"m\",\"from\":{\"id\":\"local.a\"}}\r\n ", true},
	{"empty from object", `{"id":"m","from":{}}`, true}, // decodes; Receive calls it a mismatch
	{"data null", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"data","data":null}]}`, true},
	{"extension part", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"com.acme.snapshot","rev":7}]}`, true},
	{"bare unknown kind decodes", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"image","src":"x"}]}`, true},
	{"ts missing decodes", `{"id":"m","from":{"id":"local.a"}}`, true},
	{"escaped strings", `{"id":"\u00e9\ud83d\ude80","from":{"id":"local.a","name":"\ud800"}}`, true},

	{"missing id", `{"ts":1,"from":{"id":"local.a"},"parts":[]}`, false},
	{"null id", `{"id":null,"from":{"id":"local.a"}}`, false},
	{"number id", `{"id":5,"from":{"id":"local.a"}}`, false},
	{"bool id", `{"id":true,"from":{"id":"local.a"}}`, false},
	{"object id", `{"id":{},"from":{"id":"local.a"}}`, false},
	{"missing from", `{"id":"m","channel":"c","parts":[]}`, false},
	{"null from", `{"id":"m","from":null}`, false},
	{"string from", `{"id":"m","from":"local.a"}`, false},
	{"number from.id", `{"id":"m","from":{"id":5}}`, false},
	{"invalid utf-8 in a string", "{\"id\":\"\xff\",\"from\":{\"id\":\"local.a\"}}", false},
	{"invalid utf-8 after", "{\"id\":\"m\",\"from\":{\"id\":\"local.a\"}}\xff", false},
	{"trailing word", `{"id":"m","from":{"id":"local.a"}} x`, false},
	{"trailing brace", `{"id":"m","from":{"id":"local.a"}}}`, false},
	{"trailing bracket", `{"id":"m","from":{"id":"local.a"}}]`, false},
	{"trailing object", `{"id":"m","from":{"id":"local.a"}}{}`, false},
	{"trailing comma", `{"id":"m","from":{"id":"local.a"}},`, false},
	{"empty body", ``, false},
	{"not json", `hello`, false},
	{"null", `null`, false},
	{"array", `[]`, false},
	{"string", `"m"`, false},
	{"number", `1`, false},
	{"truncated", `{"id":"m"`, false},
	{"string ts", `{"id":"m","from":{"id":"local.a"},"ts":"1"}`, false},
	{"float ts", `{"id":"m","from":{"id":"local.a"},"ts":1.5}`, false},
	{"parts object", `{"id":"m","from":{"id":"local.a"},"parts":{}}`, false},
	{"part without kind", `{"id":"m","from":{"id":"local.a"},"parts":[{"text":"x"}]}`, false},
	{"null part", `{"id":"m","from":{"id":"local.a"},"parts":[null]}`, false},
	{"string part", `{"id":"m","from":{"id":"local.a"},"parts":["x"]}`, false},
	{"number kind", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":1}]}`, false},
	{"number text", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"text","text":1}]}`, false},
	{"data part without data", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"data"}]}`, false},
	{"string size", `{"id":"m","from":{"id":"local.a"},"parts":[{"kind":"artifact","size":"1"}]}`, false},
	{"mentions string", `{"id":"m","from":{"id":"local.a"},"mentions":"bob"}`, false},
}

func TestDecodeMessage(t *testing.T) {
	for _, tt := range decodeCases {
		t.Run(tt.name, func(t *testing.T) {
			m, err := protocol.DecodeMessage([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("DecodeMessage(%q) = %+v, %v; want ok=%v", tt.in, m, err, tt.ok)
			}
			if err != nil && !reflect.DeepEqual(m, protocol.Message{}) {
				t.Errorf("DecodeMessage(%q) failed but returned %+v", tt.in, m)
			}
		})
	}
}

func TestDecodeEmptyID(t *testing.T) {
	m, err := protocol.DecodeMessage([]byte(`{"id":"","from":{"id":"local.a"},"channel":"c","parts":[]}`))
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	if m.ID != "" || m.From.ID != "local.a" || m.Channel != "c" {
		t.Errorf("DecodeMessage = %+v", m)
	}
	if err := m.Validate(); err == nil {
		t.Error("Validate accepted an empty id; a sender must set one")
	}
}

func TestPartRoundTrip(t *testing.T) {
	ext := protocol.Part{}
	extJSON := `{"kind":"com.acme.snapshot","rev":7,"state":{"x":[1,2.5,"s",null,true]},"note":"<b>"}`
	if err := json.Unmarshal([]byte(extJSON), &ext); err != nil {
		t.Fatalf("unmarshal extension part: %v", err)
	}
	if ext.Kind != "com.acme.snapshot" || ext.Text != "" || ext.Data != nil {
		t.Fatalf("extension part = %+v", ext)
	}

	in := protocol.Message{
		ID: "m1", TS: 1710000000000, Space: "main",
		From:    protocol.EndpointRef{ID: ownerA + ".alice", Name: "alice"},
		To:      ownerB + ".bob",
		ReplyTo: "m0", ContextID: "ctx",
		Parts: []protocol.Part{
			protocol.TextPart("hello\n\"world\" <é🚀>"),
			{Kind: protocol.PartData, Data: json.RawMessage(`{"a":[1,{"b":null,"c":{"d":[true,false]}}],"e":"f","g":1e400}`)},
			{Kind: protocol.PartData, Data: json.RawMessage(`"just a string"`)},
			{Kind: protocol.PartArtifact, Name: "report.pdf", MediaType: "application/pdf", Digest: digestA, Size: 1234},
			{Kind: protocol.PartArtifact, Name: "empty", MediaType: "text/plain", Digest: digestA, Size: 0},
			ext,
		},
	}
	if err := in.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	out, err := protocol.DecodeMessage(b)
	if err != nil {
		t.Fatalf("DecodeMessage(%s): %v", b, err)
	}
	if err := sameMessage(in, out); err != "" {
		t.Errorf("round trip through %s: %s", b, err)
	}

	var fields map[string]any
	if err := json.Unmarshal(out.Parts[5].Raw, &fields); err != nil {
		t.Fatalf("extension Raw %q: %v", out.Parts[5].Raw, err)
	}
	if fields["kind"] != "com.acme.snapshot" || fields["rev"] != 7.0 || fields["note"] != "<b>" {
		t.Errorf("extension part lost its fields: %v", fields)
	}
	if state, _ := fields["state"].(map[string]any); state == nil || len(state["x"].([]any)) != 5 {
		t.Errorf("extension part lost its nested fields: %v", fields)
	}
}

func TestPartJSONShapes(t *testing.T) {
	tests := []struct {
		p    protocol.Part
		want string
	}{
		{protocol.TextPart("hi"), `{"kind":"text","text":"hi"}`},
		{protocol.TextPart(""), `{"kind":"text","text":""}`},
		{protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`{"a": 1}`)}, `{"kind":"data","data":{"a":1}}`},
		{protocol.Part{Kind: protocol.PartArtifact, Name: "n", MediaType: "m", Digest: digestA, Size: 0},
			`{"kind":"artifact","name":"n","mediaType":"m","digest":"` + digestA + `","size":0}`},
		{protocol.Part{Kind: "com.acme.ping"}, `{"kind":"com.acme.ping"}`},
		{protocol.Part{Kind: "com.acme.x", Raw: json.RawMessage(`{"kind":"com.acme.x", "y":2}`)}, `{"kind":"com.acme.x","y":2}`},
		// Fields of other kinds are not written.
		{protocol.Part{Kind: protocol.PartText, Text: "t", Name: "n", Data: json.RawMessage(`1`)}, `{"kind":"text","text":"t"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.p)
		if err != nil {
			t.Errorf("Marshal(%+v): %v", tt.p, err)
			continue
		}
		if string(b) != tt.want {
			t.Errorf("Marshal(%+v) = %s, want %s", tt.p, b, tt.want)
		}
	}
	if b, err := json.Marshal(protocol.Part{Kind: protocol.PartData}); err == nil {
		t.Errorf("Marshal of a data part without data = %s, want an error", b)
	}
}

func TestMessageValidate(t *testing.T) {
	valid := func() protocol.Message {
		return protocol.Message{
			ID:      "m1",
			From:    protocol.EndpointRef{ID: ownerA + ".alice", Name: "alice"},
			Channel: "team.backend",
			Parts:   []protocol.Part{protocol.TextPart("hi")},
		}
	}
	withPart := func(p protocol.Part) func(*protocol.Message) {
		return func(m *protocol.Message) { m.Parts = append(m.Parts, p) }
	}
	art := func(digest string, size int64) protocol.Part {
		return protocol.Part{Kind: protocol.PartArtifact, Name: "a", MediaType: "b", Digest: digest, Size: size}
	}
	tests := []struct {
		name string
		edit func(*protocol.Message)
		ok   bool
	}{
		{"valid", func(*protocol.Message) {}, true},
		{"to", func(m *protocol.Message) { m.Channel, m.To = "", ownerB+".bob" }, true},
		{"toService", func(m *protocol.Message) { m.Channel, m.ToService = "", "reviewer" }, true},
		{"local sender", func(m *protocol.Message) { m.From.ID = "local." + nkey }, true},

		{"empty id", func(m *protocol.Message) { m.ID = "" }, false},
		{"empty from", func(m *protocol.Message) { m.From.ID = "" }, false},
		{"from without owner", func(m *protocol.Message) { m.From.ID = "alice" }, false},
		{"from nkey owner", func(m *protocol.Message) { m.From.ID = nkey + ".team" }, false},
		{"no routing", func(m *protocol.Message) { m.Channel = "" }, false},
		{"channel and to", func(m *protocol.Message) { m.To = ownerB + ".bob" }, false},
		{"channel and toService", func(m *protocol.Message) { m.ToService = "reviewer" }, false},
		{"to and toService", func(m *protocol.Message) { m.Channel, m.To, m.ToService = "", "x", "y" }, false},
		{"all three", func(m *protocol.Message) { m.To, m.ToService = "x", "y" }, false},
		{"nil parts", func(m *protocol.Message) { m.Parts = nil }, false},
		{"empty parts", func(m *protocol.Message) { m.Parts = []protocol.Part{} }, false},

		{"artifact", withPart(art(digestA, 10)), true},
		{"artifact size 0", withPart(art(digestA, 0)), true},
		{"artifact negative size", withPart(art(digestA, -1)), false},
		{"artifact no digest", withPart(art("", 1)), false},
		{"artifact uppercase hex", withPart(art(strings.ToUpper(digestA[:7])+strings.ToUpper(digestA[7:]), 1)), false},
		{"artifact uppercase hex only", withPart(art("sha256:"+strings.Repeat("ABCDEF0123456789", 4), 1)), false},
		{"artifact short digest", withPart(art(digestA[:len(digestA)-1], 1)), false},
		{"artifact long digest", withPart(art(digestA+"0", 1)), false},
		{"artifact sha1", withPart(art("sha1:"+strings.Repeat("a", 40), 1)), false},
		{"artifact no prefix", withPart(art(strings.Repeat("a", 64), 1)), false},
		{"artifact non-hex", withPart(art("sha256:"+strings.Repeat("g", 64), 1)), false},
		{"artifact digest newline", withPart(art(digestA+"\n", 1)), false},

		{"data object", withPart(protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`{"a":1}`)}), true},
		{"data null", withPart(protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`null`)}), true},
		{"data string", withPart(protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`"s"`)}), true},
		{"data empty", withPart(protocol.Part{Kind: protocol.PartData}), false},
		{"data invalid", withPart(protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`{`)}), false},
		{"data NaN", withPart(protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`NaN`)}), false},

		{"extension kind", withPart(protocol.Part{Kind: "com.acme.snapshot"}), true},
		{"two-label extension", withPart(protocol.Part{Kind: "a.b"}), true},
		{"extension with dashes", withPart(protocol.Part{Kind: "io.my-org.v2"}), true},
		{"bare unknown kind", withPart(protocol.Part{Kind: "image"}), false},
		{"empty kind", withPart(protocol.Part{Kind: ""}), false},
		{"capital Text", withPart(protocol.Part{Kind: "Text"}), false},
		{"trailing dot", withPart(protocol.Part{Kind: "com.acme."}), false},
		{"leading dot", withPart(protocol.Part{Kind: ".com"}), false},
		{"double dot", withPart(protocol.Part{Kind: "com..acme"}), false},
		{"underscore", withPart(protocol.Part{Kind: "com.acme_x.y"}), false},
		{"slash", withPart(protocol.Part{Kind: "com.acme/x"}), false},
		{"space", withPart(protocol.Part{Kind: "com.acme x"}), false},
	}
	for _, tt := range tests {
		m := valid()
		tt.edit(&m)
		err := m.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}

	m := valid()
	m.Parts = append(m.Parts, protocol.Part{Kind: "image"})
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "part 1") {
		t.Errorf("Validate() = %v, want it to name part 1", err)
	}
}

func TestNormalizeMentions(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{}, nil},
		{[]string{"", "  ", "\t"}, nil},
		{[]string{"bob"}, []string{"bob"}},
		{[]string{" Bob ", "bob", "ALICE", "alice", "carol", "BOB"}, []string{"bob", "alice", "carol"}},
		{[]string{"zed", "amy"}, []string{"zed", "amy"}}, // first-seen order, not sorted
		{[]string{"ÉVA", "éva"}, []string{"éva"}},
	}
	for _, tt := range tests {
		got := protocol.NormalizeMentions(tt.in)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("NormalizeMentions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}

	// An empty result is omitted from the wire.
	m := sampleMessage()
	m.Mentions = protocol.NormalizeMentions([]string{" "})
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("mentions")) {
		t.Errorf("empty mentions were sent: %s", b)
	}
}

func TestMessageText(t *testing.T) {
	data := protocol.Part{Kind: protocol.PartData, Data: json.RawMessage(`1`)}
	tests := []struct {
		parts []protocol.Part
		want  string
	}{
		{nil, ""},
		{[]protocol.Part{data}, ""},
		{[]protocol.Part{protocol.TextPart("a")}, "a"},
		{[]protocol.Part{protocol.TextPart("a"), data, protocol.TextPart("b")}, "a\nb"},
		{[]protocol.Part{protocol.TextPart("a"), protocol.TextPart(""), protocol.TextPart("b")}, "a\n\nb"},
		{[]protocol.Part{protocol.TextPart(""), protocol.TextPart("b")}, "\nb"},
		{[]protocol.Part{{Kind: "com.acme.x", Text: "hidden"}, protocol.TextPart("x")}, "x"},
	}
	for _, tt := range tests {
		m := protocol.Message{Parts: tt.parts}
		if got := m.Text(); got != tt.want {
			t.Errorf("Text() of %+v = %q, want %q", tt.parts, got, tt.want)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.in))
	}
	if b, err := json.Marshal(sampleMessage()); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := protocol.DecodeMessage(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%q decoded to %+v, which does not encode: %v", data, m, err)
		}
		m2, err := protocol.DecodeMessage(b)
		if err != nil {
			t.Fatalf("%q decoded and encoded to %q, which does not decode: %v", data, b, err)
		}
		if diff := sameMessage(m, m2); diff != "" {
			t.Fatalf("%q: round trip through %q changed the message: %s", data, b, diff)
		}
		b2, err := json.Marshal(m2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not stable: %q then %q, %v", b, b2, err)
		}
	})
}

// sameMessage compares two messages field by field, treating an empty mention list as
// absent and comparing raw JSON (data and extension parts) by value. It returns "" when
// they match, else what differs.
func sameMessage(a, b protocol.Message) string {
	type head struct {
		ID, Space, Channel, To, ToService, ReplyTo, ContextID string
		TS                                                    int64
		From                                                  protocol.EndpointRef
	}
	ha := head{a.ID, a.Space, a.Channel, a.To, a.ToService, a.ReplyTo, a.ContextID, a.TS, a.From}
	hb := head{b.ID, b.Space, b.Channel, b.To, b.ToService, b.ReplyTo, b.ContextID, b.TS, b.From}
	if ha != hb {
		return "header " + sprint(ha) + " != " + sprint(hb)
	}
	if len(a.Mentions) != len(b.Mentions) || (len(a.Mentions) > 0 && !reflect.DeepEqual(a.Mentions, b.Mentions)) {
		return "mentions " + sprint(a.Mentions) + " != " + sprint(b.Mentions)
	}
	if len(a.Parts) != len(b.Parts) {
		return "part count " + sprint(len(a.Parts)) + " != " + sprint(len(b.Parts))
	}
	for i := range a.Parts {
		pa, pb := a.Parts[i], b.Parts[i]
		if pa.Kind != pb.Kind || pa.Text != pb.Text || pa.Name != pb.Name || pa.MediaType != pb.MediaType ||
			pa.Digest != pb.Digest || pa.Size != pb.Size {
			return "part " + sprint(i) + ": " + sprint(pa) + " != " + sprint(pb)
		}
		if !sameJSON(pa.Data, pb.Data) {
			return "part " + sprint(i) + " data " + string(pa.Data) + " != " + string(pb.Data)
		}
		if !sameJSON(pa.Raw, pb.Raw) {
			return "part " + sprint(i) + " raw " + string(pa.Raw) + " != " + string(pb.Raw)
		}
	}
	return ""
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	va, ea := decodeJSONValue(a)
	vb, eb := decodeJSONValue(b)
	if ea != nil || eb != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // exact numbers, and no overflow on 1e400
	var v any
	err := dec.Decode(&v)
	return v, err
}

func sprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
