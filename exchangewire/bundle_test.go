package exchangewire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/trust/trusttest"
)

// goodBundle is a valid bundle; each case of TestDecodeBundle breaks one thing.
func goodBundle(creds string) Bundle {
	return Bundle{
		Space: "prod", Server: "tls://nats.example.com:4222", TLSRequired: true,
		UserAuth: UserAuth{Provider: "cotal",
			IdP: BundleIdP{URL: "https://idp.example.com", Issuer: "https://idp.example.com", Audience: "https://idp.example.com"},
			Endpoints: Endpoints{URL: "https://mesh.example.com/cotal", JWKSURL: "https://mesh.example.com/cotal/jwks",
				AgentProvisioningURL: "https://mesh.example.com/provision"}},
		SentinelCreds: creds,
	}
}

func TestDecodeBundle(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	encode := func(b Bundle) string {
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	with := func(edit func(*Bundle)) string {
		b := goodBundle(creds)
		edit(&b)
		return encode(b)
	}
	good := encode(goodBundle(creds))
	cases := []struct {
		name string
		in   string
		msg  string // empty: accepted
	}{
		{"good", good, ""},
		{"plain nats, no tls", with(func(b *Bundle) { b.Server, b.TLSRequired = "nats://127.0.0.1:4222", false }), ""},
		{"nats with tls required", with(func(b *Bundle) { b.Server = "nats://n.example:4222" }), ""},
		{"loopback http endpoints", with(func(b *Bundle) {
			b.UserAuth.Endpoints = Endpoints{URL: "http://127.0.0.1:7451", JWKSURL: "http://127.0.0.1:7451/jwks"}
		}), ""},
		{"no provisioning", with(func(b *Bundle) { b.UserAuth.Endpoints.AgentProvisioningURL = "" }), ""},

		{"unknown top-level field", strings.Replace(good, `{"space"`, `{"extra":1,"space"`, 1), ""},
		{"unknown nested field", strings.Replace(good, `"provider"`, `"view":"admin","provider"`, 1), ""},
		{"no jwksUrl", with(func(b *Bundle) { b.UserAuth.Endpoints.JWKSURL = "" }), ""},
		{"policy", strings.Replace(good, `{"space"`, `{"policy":{"events":"required"},"space"`, 1), ""},
		{"other policy", strings.Replace(good, `{"space"`, `{"policy":{"events":"optional"},"space"`, 1), "policy"},
		{"policy with more", strings.Replace(good, `{"space"`, `{"policy":{"events":"required","x":1},"space"`, 1), "policy"},
		{"manager authority http remote", with(func(b *Bundle) { b.UserAuth.Endpoints.ManagerAuthorityURL = "http://mesh.example.com/m" }), "managerAuthorityUrl"},
		{"trailing data", good + "{}", "after top-level value"},
		{"not an object", `[]`, "decode bundle"},
		{"tlsRequired missing", strings.Replace(good, `"tlsRequired":true,`, "", 1), "tlsRequired is required"},
		{"bad space", with(func(b *Bundle) { b.Space = "a.b" }), "space"},
		{"empty space", with(func(b *Bundle) { b.Space = "" }), "space"},
		{"server https", with(func(b *Bundle) { b.Server = "https://n.example" }), "server"},
		{"server missing", with(func(b *Bundle) { b.Server = "" }), "server"},
		{"tls scheme without tlsRequired", with(func(b *Bundle) { b.TLSRequired = false }), "contradicts"},
		{"wss scheme without tlsRequired", with(func(b *Bundle) { b.Server, b.TLSRequired = "wss://n.example", false }), "contradicts"},
		{"provider", with(func(b *Bundle) { b.UserAuth.Provider = "auth0" }), "provider"},
		{"idp url http", with(func(b *Bundle) { b.UserAuth.IdP.URL = "http://idp.example.com" }), "idp.url"},
		{"idp url missing", with(func(b *Bundle) { b.UserAuth.IdP.URL = "" }), "idp.url"},
		{"idp issuer missing", with(func(b *Bundle) { b.UserAuth.IdP.Issuer = "" }), "issuer and audience"},
		{"idp audience missing", with(func(b *Bundle) { b.UserAuth.IdP.Audience = "" }), "issuer and audience"},
		{"endpoint url http remote", with(func(b *Bundle) { b.UserAuth.Endpoints.URL = "http://mesh.example.com" }), "endpoints.url"},
		{"endpoint url query", with(func(b *Bundle) { b.UserAuth.Endpoints.URL = "https://mesh.example.com/?a" }), "endpoints.url"},
		{"endpoint url userinfo", with(func(b *Bundle) { b.UserAuth.Endpoints.URL = "https://u@mesh.example.com" }), "endpoints.url"},
		{"provisioning http", with(func(b *Bundle) { b.UserAuth.Endpoints.AgentProvisioningURL = "http://127.0.0.1/p" }), "agentProvisioningUrl"},
		{"creds missing", with(func(b *Bundle) { b.SentinelCreds = "" }), "sentinelCreds"},
		{"creds garbage", with(func(b *Bundle) { b.SentinelCreds = "not creds" }), "sentinelCreds"},
		{"creds without seed", with(func(b *Bundle) { b.SentinelCreds = creds[:strings.Index(creds, "************************* IMPORTANT")] }), "sentinelCreds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := DecodeBundle([]byte(c.in))
			if c.msg == "" {
				if err != nil {
					t.Fatalf("DecodeBundle: %v", err)
				}
				if again, err := DecodeBundle([]byte(encode(b))); err != nil || encode(again) != encode(b) {
					t.Fatalf("re-encoded bundle: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("DecodeBundle: %v, want an error with %q", err, c.msg)
			}
		})
	}
}

func FuzzDecodeBundle(f *testing.F) {
	creds := trusttest.SentinelCreds(f)
	good, err := json.Marshal(goodBundle(creds))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"space":"prod","tlsRequired":false}`))
	f.Add([]byte(strings.Replace(string(good), `"tls://`, `"nats://`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBundle(data)
		if err != nil {
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("decoded bundle does not validate: %v", err)
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeBundle(out)
		if err != nil {
			t.Fatalf("re-encoded bundle %s: %v", out, err)
		}
		if again != b {
			t.Fatalf("round trip changed the bundle: %+v, then %+v", b, again)
		}
	})
}

func TestBundleURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://mesh.example.com", "https://mesh.example.com/.well-known/cotal-mesh"},
		{"https://mesh.example.com/", "https://mesh.example.com/.well-known/cotal-mesh"},
		{"https://mesh.example.com/cotal/?a=b#c", "https://mesh.example.com/cotal/.well-known/cotal-mesh"},
		{"http://127.0.0.1:7451", "http://127.0.0.1:7451/.well-known/cotal-mesh"},
		{"http://mesh.example.com", ""},
		{"https://u:p@mesh.example.com", ""},
		{"ftp://mesh.example.com", ""},
		{"mesh.example.com", ""},
	}
	for _, c := range cases {
		got, err := BundleURL(c.in)
		if c.want == "" && err == nil || c.want != "" && (err != nil || got != c.want) {
			t.Errorf("BundleURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestFetchBundleRefusals(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	good, err := json.Marshal(goodBundle(creds))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		msg     string
	}{
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		}, "redirects are not followed"},
		{"not json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write(good)
		}, "content type"},
		{"too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"space":"` + strings.Repeat("a", MaxBundle) + `"}`))
		}, "larger than"},
		{"invalid", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"space":"prod"}`))
		}, "decode bundle"},
		{"ok", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != BundlePath {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(good)
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			b, err := FetchBundle(t.Context(), srv.URL+"/?pinned=1")
			if c.msg == "" {
				if err != nil || b.Space != "prod" {
					t.Fatalf("FetchBundle: %+v, %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("FetchBundle: %v, want an error with %q", err, c.msg)
			}
		})
	}
}
