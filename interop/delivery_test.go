// Package interop checks Go against the TypeScript reference's wire shapes: golden
// fixtures written from the reference source (testdata/<area>/README.md names the file
// and function each follows), decoded by Go and compared field for field with what Go
// emits, and foreign peers that use raw nats.go only.
package interop

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cotal-ai/cotal/protocol"
)

// fixture reads testdata/delivery/<name>.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "delivery", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameJSON fails unless a and b decode to equal values.
func sameJSON(t testing.TB, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: Go emitted %s: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: fixture: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n Go  %s\n ref %s", what, got, want)
	}
}

// topKeys lists the keys of a JSON object in wire order.
func topKeys(t testing.TB, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// headers returns a header lookup over the pairs kv.
func headers(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestDeliveryFrame: Go reads the reference's DLV frame, and the frame Go writes for the
// same post is the reference's, field for field.
func TestDeliveryFrame(t *testing.T) {
	ref := fixture(t, "frame.json")
	ho, err := protocol.DecodeHandoff("team", headers(protocol.HeaderDeliveryFrame, "1"), ref)
	if err != nil {
		t.Fatalf("Go refuses the reference frame: %v", err)
	}
	rec, err := protocol.Receive(ho.Subject, ho.Data)
	if err != nil {
		t.Fatalf("the reference frame's message fails the receive checks: %v", err)
	}
	if rec.Kind != protocol.DeliveryChannel || rec.Subject.Channel != "general" || rec.Message.Text() != "hello" || rec.Message.From.ID != "local.alice" {
		t.Fatalf("read %+v", rec)
	}

	// The post as published on CHAT: the envelope a sender wrote (Go or the reference).
	post := []byte(`{"id":"m-0001","ts":1700000000000,"space":"team","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"hello"}]}`)
	got, err := protocol.EncodeDeliveryFrame("general", post)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "frame", got, ref)
	if keys := topKeys(t, got); !reflect.DeepEqual(keys, []string{"version", "channel", "msg"}) {
		t.Fatalf("frame key order %v: want version, channel, msg", keys)
	}

	// A post addressed elsewhere in its body is authenticated for the channel its
	// subject names: channel forced, to/toService removed.
	odd := []byte(`{"id":"m-2","ts":1,"space":"team","from":{"id":"local.alice","name":"alice"},"to":"local.bob","parts":[{"kind":"text","text":"x"}]}`)
	got, err = protocol.EncodeDeliveryFrame("general", odd)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "authenticated frame", got, []byte(`{"version":1,"channel":"general","msg":{"id":"m-2","ts":1,"space":"team","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"x"}]}}`))

	if id := protocol.DLVMsgID("m-0001", protocol.Principal{Owner: "local", Actor: "bob"}, "abcdefghijklmnopqrstuvwxyz", 3); id != "m-0001:local.bob:abcdefghijklmnopqrstuvwxyz:3" {
		t.Fatalf("Nats-Msg-Id %q", id)
	}

	// Refused like the reference refuses: another frame header value, another version, a
	// msg whose channel is not the frame's.
	for name, c := range map[string]struct {
		h    func(string) string
		body string
	}{
		"header 2":         {headers(protocol.HeaderDeliveryFrame, "2"), string(ref)},
		"version 2":        {headers(protocol.HeaderDeliveryFrame, "1"), `{"version":2,"channel":"general","msg":{}}`},
		"channel mismatch": {headers(protocol.HeaderDeliveryFrame, "1"), `{"version":1,"channel":"other","msg":{"channel":"general","from":{"id":"local.alice"}}}`},
		"pattern channel":  {headers(protocol.HeaderDeliveryFrame, "1"), `{"version":1,"channel":"team.*","msg":{"channel":"team.*","from":{"id":"local.alice"}}}`},
		"no header":        {headers(), string(ref)},
	} {
		if _, err := protocol.DecodeHandoff("team", c.h, []byte(c.body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestEarlierGoFrameStillRead: a copy an earlier Go daemon stored (header Cotal-Frame,
// the chat subject in Cotal-Subject, the envelope as the body) still reads after an
// upgrade, so a member's unread copies are not lost.
func TestEarlierGoFrameStillRead(t *testing.T) {
	post := `{"id":"m-9","ts":1,"space":"team","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"old"}]}`
	ho, err := protocol.DecodeHandoff("team", headers(protocol.HeaderFrame, "1", protocol.HeaderSubject, "cotal.team.chat.local.alice.general",
		protocol.HeaderSeq, "42", protocol.HeaderReason, protocol.HandoffDurableChannel), []byte(post))
	if err != nil {
		t.Fatal(err)
	}
	if ho.Seq != 42 || ho.Reason != protocol.HandoffDurableChannel || ho.Subject != "cotal.team.chat.local.alice.general" {
		t.Fatalf("%+v", ho)
	}
	if _, err := protocol.Receive(ho.Subject, ho.Data); err != nil {
		t.Fatal(err)
	}
}
