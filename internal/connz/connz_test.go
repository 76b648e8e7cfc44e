package connz

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	p, err := Decode([]byte(`{"server":{"id":"S1"},"data":{"server_id":"S1","connections":[{"cid":7,"name":"n","authorized_user":"u_x.bob"}]}}`))
	if err != nil || p.Server != "S1" || len(p.Conns) != 1 || p.Conns[0] != (Conn{CID: 7, Name: "n", User: "u_x.bob"}) {
		t.Fatalf("page %+v, %v", p, err)
	}
	if p, err := Decode([]byte(`{"server":{"id":"S2"},"data":{"connections":[]}}`)); err != nil || p.Server != "S2" {
		t.Fatalf("server id from the envelope: %+v, %v", p, err)
	}
	for body, want := range map[string]string{
		`{"server":{"id":"S3"},"error":{"code":403,"description":"no"}}`: "server S3 refused to list connections: 403 no",
		`{"server":{"id":"S4"}}`: "server S4 listed no connections",
		`not json`:               "connection listing",
	} {
		if _, err := Decode([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"server":{"id":"S"},"data":{"connections":[{"cid":1}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if (p == nil) == (err == nil) {
			t.Fatalf("page %v and error %v", p, err)
		}
	})
}
