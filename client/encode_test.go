package client

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// encode must put on the wire what json.Marshal and Header.Set did before it.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	e, err := New(&nats.Conn{}, Config{Space: "main", Name: "alice", Role: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	m := e.Envelope(Draft{Parts: []protocol.Part{protocol.TextPart("a <b> & \"c\"\n\u2028"),
		{Kind: protocol.PartData, Data: json.RawMessage(`{"x": "<y>"}`)}}, Mentions: []string{"Bob"}, ReplyTo: "r"})
	m.To = "local.bob"
	subject := protocol.InstSubject("main", protocol.Principal{Owner: "local", Actor: "bob"}, e.me)
	msg, err := e.encode(subject, m)
	if err != nil {
		t.Fatal(err)
	}
	want := nats.NewMsg(subject)
	want.Data, _ = json.Marshal(m)
	want.Header.Set(jetstream.MsgIDHeader, m.ID)
	if msg.Subject != want.Subject || !bytes.Equal(msg.Data, want.Data) || !reflect.DeepEqual(msg.Header, want.Header) {
		t.Fatalf("encode = %q %q %v, want %q %q %v", msg.Subject, msg.Data, msg.Header, want.Subject, want.Data, want.Header)
	}
}
