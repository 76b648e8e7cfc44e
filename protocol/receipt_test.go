package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// The read receipt DM is the shape docs/interop.md documents (testdata/receipt.json),
// byte for byte, and reads back; a reader that knows no ai.cotal.receipt finds a valid
// DM with no text in it.
func TestReceiptGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/receipt.json")
	if err != nil {
		t.Fatal(err)
	}
	m := Message{ID: "019ada00-0000-7000-8000-0000000000b2", TS: 1764504000500, Space: "main",
		From: EndpointRef{ID: "local.bob", Name: "bob"}, To: "local.alice",
		Parts: []Part{ReceiptPart("019ada00-0000-7000-8000-0000000000a1", time.UnixMilli(1764504000400))}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := EncodeMessage(&m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("receipt DM:\n%s\nwant (testdata/receipt.json):\n%s", got, want)
	}
	back, err := DecodeMessage(want)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := ReceiptOf(&back)
	if !ok || !r.Valid() || r.Of != "019ada00-0000-7000-8000-0000000000a1" || r.At != 1764504000400 || r.Receipt != ReceiptRead {
		t.Fatalf("read back %+v, %v", r, ok)
	}
	if back.Text() != "" || back.Validate() != nil {
		t.Fatalf("as a plain DM: text %q, validate %v", back.Text(), back.Validate())
	}
	// A receipt that cannot be read is still a receipt (never answered), but not valid.
	bad := Message{Parts: []Part{{Kind: PartReceipt, Raw: json.RawMessage(`{"kind":"ai.cotal.receipt","receipt":"seen"}`)}}}
	if r, ok := ReceiptOf(&bad); !ok || r.Valid() {
		t.Fatalf("an unreadable receipt: %+v, %v", r, ok)
	}
	if _, ok := ReceiptOf(&Message{Parts: []Part{TextPart("read")}}); ok {
		t.Fatal("a text DM read as a receipt")
	}
}

// A mention notice keeps who, where, when and the id of a post and nothing of its text,
// replyTo or contextId (testdata/mention-notice.json).
func TestMentionNoticeGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/mention-notice.json")
	if err != nil {
		t.Fatal(err)
	}
	post := []byte(`{"id":"019ada00-0000-7000-8000-0000000000c3","ts":1764504000600,"space":"main",` +
		`"from":{"id":"local.alice","name":"alice","role":"planner"},"channel":"secret","mentions":["Eve"],` +
		`"parts":[{"kind":"text","text":"the plan"},{"kind":"data","data":{"k":1}}],"replyTo":"x","contextId":"y"}`)
	got, err := EncodeMentionNotice(post, "secret")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimSpace(want)) {
		t.Fatalf("notice:\n%s\nwant (testdata/mention-notice.json):\n%s", got, want)
	}
	back, err := DecodeMessage(want)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := MentionNoticeOf(&back)
	if !ok || n.Of != "019ada00-0000-7000-8000-0000000000c3" || n.Channel != "secret" || back.Text() != "" || back.Validate() != nil {
		t.Fatalf("read back %+v, %v (validate %v)", n, ok, back.Validate())
	}
	if _, err := EncodeMentionNotice([]byte(`{"ts":1}`), "secret"); err == nil {
		t.Fatal("a post without an id made a notice")
	}
}
