package a2apeer_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cotal-ai/cotal/a2apeer"
)

func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"https://agents.example.com/support", true},
		{"https://agents.example.com:8443/a/.well-known/agent-card.json", true},
		{"http://127.0.0.1:9999", true},
		{"http://127.8.9.10/x", true},
		{"http://[::1]:80/", true},
		{"http://localhost:41241", true},
		{"http://agents.example.com/", false}, // plain http off loopback
		{"http://10.0.0.1:80/", false},
		{"http://192.0.2.1/", false},
		{"ftp://127.0.0.1/", false},
		{"https://user:pw@agents.example.com/", false},
		{"https://agents.example.com/#frag", false},
		{"agents.example.com", false},
		{"https:///nohost", false},
		{"", false},
	} {
		_, err := a2apeer.CheckURL(c.in)
		if (err == nil) != c.ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", c.in, err, c.ok)
		}
		if err != nil && !errors.Is(err, a2apeer.ErrURL) {
			t.Errorf("CheckURL(%q) = %v, not ErrURL", c.in, err)
		}
	}
}

func TestFetchCard(t *testing.T) {
	a := newAgent(t)
	for _, u := range []string{a.srv.URL, a.srv.URL + "/", a.srv.URL + "/.well-known/agent-card.json"} {
		c, cu, err := (a2apeer.HTTP{}).FetchCard(t.Context(), u, "")
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if cu.String() != a.srv.URL+"/.well-known/agent-card.json" || c.Version != "1.2.3" {
			t.Fatalf("%s: read %s, card %+v", u, cu, c)
		}
		ep, err := c.Endpoint()
		if err != nil || ep != a.srv.URL+"/rpc" {
			t.Fatalf("endpoint %q, %v", ep, err)
		}
		sk := c.PeerSkills()
		if len(sk) != 2 || sk[0].ID != "echo" || sk[1].Name != "Shout" {
			t.Fatalf("skills %+v", sk)
		}
	}
}

// A card served over https, its calls on the same host: the bridge's client trusts the
// roots it is given.
func TestFetchCardTLS(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"name":"tls agent","url":"` + srv.URL + `/rpc","version":"1"}`))
	}))
	defer srv.Close()
	tc := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	if _, _, err := (a2apeer.HTTP{TLS: tc}).FetchCard(t.Context(), srv.URL, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (a2apeer.HTTP{}).FetchCard(t.Context(), srv.URL, ""); err == nil {
		t.Fatal("a certificate no root signs was accepted")
	}
}

// The attack: a registration URL on loopback that redirects elsewhere. A redirect to
// another host (or another port of the same) is refused before anything is dialled; a
// redirect on the same origin is followed.
func TestFetchCardRedirects(t *testing.T) {
	a := newAgent(t)
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/away/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://192.0.2.1/.well-known/agent-card.json", http.StatusFound)
	})
	mux.HandleFunc("/port/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/.well-known/agent-card.json", http.StatusFound)
	})
	mux.HandleFunc("/here/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, a.srv.URL+"/.well-known/agent-card.json", http.StatusFound)
	})
	redir := httptest.NewServer(mux)
	defer redir.Close()
	for _, path := range []string{"/away/", "/port/"} {
		_, _, err := (a2apeer.HTTP{}).FetchCard(t.Context(), redir.URL+path, "")
		if !errors.Is(err, a2apeer.ErrURL) || !strings.Contains(err.Error(), "redirect") {
			t.Fatalf("%s: %v, want a refused redirect", path, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the other origin was reached %d times", hits.Load())
	}
	// Same origin: the agent's own server redirecting to its card.
	mux2 := http.NewServeMux()
	var self *httptest.Server
	mux2.HandleFunc("/old/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new/card.json", http.StatusMovedPermanently)
	})
	mux2.HandleFunc("/new/card.json", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"name":"moved","url":"` + self.URL + `/rpc"}`))
	})
	self = httptest.NewServer(mux2)
	defer self.Close()
	if c, _, err := (a2apeer.HTTP{}).FetchCard(t.Context(), self.URL+"/old", ""); err != nil || c.Name != "moved" {
		t.Fatalf("same-origin redirect: %+v, %v", c, err)
	}
}

// The attack: a card over 1 MiB, announced by its length or streamed without one, is
// refused without being read whole.
func TestFetchCardTooLarge(t *testing.T) {
	pad := strings.Repeat("x", a2apeer.MaxCardSize)
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			body := `{"name":"big","url":"http://127.0.0.1/rpc","description":"` + pad + `"}`
			if !chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			_, _ = w.Write([]byte(body))
		}))
		_, _, err := (a2apeer.HTTP{}).FetchCard(t.Context(), srv.URL, "")
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("chunked %v: %v, want the size limit", chunked, err)
		}
	}
}

// A card may not send calls to another host than its own, nor serve only another
// transport.
func TestCardValidate(t *testing.T) {
	for body, want := range map[string]string{
		`{"name":"x","url":"http://elsewhere.example.com/rpc"}`:                 "plain http only on loopback",
		`{"name":"x","url":"https://elsewhere.example.com/rpc"}`:                "another host",
		`{"name":"x","url":"http://127.0.0.2/rpc"}`:                             "another host",
		`{"name":"x","url":"http://127.0.0.1/rpc","preferredTransport":"GRPC"}`: "not JSON-RPC",
		`{"name":"","url":"http://127.0.0.1/rpc"}`:                              "no name",
		`{"name":"x"}`: "no url",
		`[1,2]`:        "not an agent card",
		`{"name":"x","url":"http://127.0.0.1/g","preferredTransport":"GRPC","additionalInterfaces":[{"url":"http://127.0.0.1/j","transport":"JSONRPC"}]}`: "",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		_, _, err := (a2apeer.HTTP{}).FetchCard(t.Context(), srv.URL, "")
		srv.Close()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", body, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
