package connz

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	p, err := Decode([]byte(`{"server":{"id":"S1"},"data":{"server_id":"S1","total":3,"connections":[{"cid":7,"name":"n","authorized_user":"u_x.bob","tags":["principal:local.bob"]}]}}`))
	if err != nil || p.Server != "S1" || p.Total != 3 || len(p.Conns) != 1 {
		t.Fatalf("page %+v, %v", p, err)
	}
	if c := p.Conns[0]; c.CID != 7 || c.Name != "n" || c.User != "u_x.bob" || len(c.Tags) != 1 || c.Tags[0] != "principal:local.bob" {
		t.Fatalf("connection %+v", c)
	}
	if p, err := Decode([]byte(`{"server":{"id":"S1","cluster":"c"},"data":{"server_id":"S1","routes":[{"remote_id":"S2"}]}}`)); err != nil || p.Cluster != "c" || len(p.Routes) != 1 || p.Routes[0] != "S2" {
		t.Fatalf("a route listing: %+v, %v", p, err)
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
