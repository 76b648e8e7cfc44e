package authsvc

import (
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/spacehost"
)

// TestParseEntry: version 2 entries take the public-face keys under the flags' rules, and
// each refusal names the manifest key (not the flag).
func TestParseEntry(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want string // in the error; "" means it parses
	}{
		{`{"version":2,"spaces":[{"space":"a","exchangePublicPort":7451,"exchangePublicUrl":"https://auth.example.com/a","exchangeTrustedProxy":true,"advertisedServer":"tls://nats.example.com:4222","agentProvisioningUrl":"https://p.example.com"}]}`, ""},
		{`{"version":2,"spaces":[{"space":"a"},{"space":"b","exchangePublicPort":7452}]}`, ""},
		{`{"version":2,"spaces":[{"space":"a","exchangePublicUrl":"https://auth.example.com"}]}`, "exchangePublicUrl: requires exchangePublicPort"},
		{`{"version":2,"spaces":[{"space":"a","exchangePublicPort":7451,"exchangePublicUrl":"http://auth.example.com"}]}`, "exchangePublicUrl"},
		{`{"version":2,"spaces":[{"space":"a","exchangePublicPort":7451,"advertisedServer":"https://nats.example.com"}]}`, "advertisedServer"},
		{`{"version":2,"spaces":[{"space":"a","exchangePublicPort":70000}]}`, "exchangePublicPort"},
		{`{"version":2,"spaces":[{"space":"a","exchangeTrustedProxy":true}]}`, "exchangeTrustedProxy"},
		{`{"version":2,"spaces":[{"space":"a","ExchangePublicPort":7451}]}`, "unknown field"},
		{`{"version":2,"spaces":[{"space":"a","port":7451}]}`, "unknown field"},
		{`{"version":2,"spaces":[{"space":"a","exchangePublicPort":7451},{"space":"b","exchangePublicPort":7451}]}`, "port 7451 is named by entry 0"},
	} {
		_, err := spacehost.ParseSpaceList([]byte(c.doc), ParseEntry)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.doc, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.doc, err, c.want)
		}
	}
}

// FuzzParseManifest: an auth-service manifest either refuses or yields entries whose
// public faces pass the flags' rules and name distinct ports.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"version":2,"spaces":[{"space":"a","exchangePublicPort":7451,"exchangeTrustedProxy":true}]}`))
	f.Add([]byte(`{"version":2,"spaces":[{"space":"a"},{"space":"b","exchangePublicPort":1}]}`))
	f.Add([]byte(`{"version":1,"spaces":["a","b"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := spacehost.ParseSpaceList(data, ParseEntry)
		if err != nil {
			return
		}
		ports := map[int]bool{}
		for _, e := range m.Spaces {
			s, ok := e.Settings.(EntrySettings)
			if !ok {
				continue
			}
			if err := s.Public.Check(); err != nil {
				t.Fatalf("accepted entry %s fails the rules: %v", e.Raw, err)
			}
			for _, p := range s.Ports() {
				if ports[p] {
					t.Fatalf("port %d accepted twice", p)
				}
				ports[p] = true
			}
		}
	})
}
