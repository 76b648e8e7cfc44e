package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// do sends method path to base with Host host (and the headers in h), and returns the
// status, the error code of a JSON error body, the content type and the body.
func do(t testing.TB, base, method, path, host, body string, h map[string]string) (int, string, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(base, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	ct := res.Header.Get("Content-Type")
	if ct == "text/event-stream" {
		return res.StatusCode, "", ct, "" // a live feed: its body never ends
	}
	b, _ := io.ReadAll(res.Body)
	var e struct{ Error string }
	_ = json.Unmarshal(b, &e)
	return res.StatusCode, e.Error, ct, string(b)
}

// routes are every route the dashboard serves, with a body for the write.
var routes = []struct{ method, path, body string }{
	{"GET", "/", ""}, {"GET", "/app.js", ""}, {"GET", "/style.css", ""},
	{"GET", "/api/meta", ""}, {"GET", "/api/roster", ""}, {"GET", "/api/channels", ""},
	{"GET", "/api/channels/team/history", ""}, {"GET", "/api/dms", ""}, {"GET", "/api/activity", ""},
	{"GET", "/feed", ""},
	{"POST", "/api/post", `{"channel":"team","text":"posted through a rebound page"}`},
}

// TestForeignHostRefused is the DNS-rebinding attack: a page on evil.example, rebound to
// 127.0.0.1, sends the browser's requests to the dashboard with Host evil.example. Every
// route refuses them (421) and the post reaches no one; the names the dashboard serves
// still work.
func TestForeignHostRefused(t *testing.T) {
	url := openMesh(t)
	alice := peer(t, url, "alice", "team")
	bob := peer(t, url, "bob", "team")
	if _, err := bob.DM(t.Context(), alice.Principal(), client.Text("a secret for alice")); err != nil {
		t.Fatal(err)
	}
	base := startWeb(t, url)
	port := base[strings.LastIndex(base, ":")+1 : len(base)-1]
	json := map[string]string{"Content-Type": "application/json"}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "localhost.:1", "127.0.0.1:1"} {
		for _, r := range routes {
			st, code, ct, body := do(t, base, r.method, r.path, host, r.body, json)
			if st != http.StatusMisdirectedRequest || code != "wrong-host" || ct == "text/event-stream" || strings.Contains(body, "secret") {
				t.Errorf("%s %s with Host %s: %d %s %s, want 421 wrong-host", r.method, r.path, host, st, code, ct)
			}
		}
	}
	// The names it serves: loopback names and addresses with its port.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "cotal.localhost:" + port, "[::1]:" + port, "LocalHost.:" + port} {
		if st, code, _, _ := do(t, base, "GET", "/api/meta", host, "", nil); st != 200 {
			t.Errorf("GET /api/meta with Host %s: %d %s, want 200", host, st, code)
		}
	}
	// A write from another site's page, even to the right host, is refused.
	for _, h := range []map[string]string{
		{"Content-Type": "application/json", "Origin": "http://evil.example"},
		{"Content-Type": "application/json", "Origin": "null"},
		{"Content-Type": "application/json", "Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "cross-site"},
	} {
		if st, code, _, _ := do(t, base, "POST", "/api/post", "", `{"channel":"team","text":"posted cross-site"}`, h); st != 403 || code != "cross-origin" {
			t.Errorf("post with %v: %d %s, want 403 cross-origin", h, st, code)
		}
	}
	// The dashboard's own page posts; the first post alice sees is that one, so none of
	// the refused ones reached the mesh.
	own := map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "same-origin"}
	if st, code, _, _ := do(t, base, "POST", "/api/post", "", `{"channel":"team","text":"from the page itself"}`, own); st != 200 {
		t.Fatalf("post from the page itself: %d %s", st, code)
	}
	for {
		select {
		case in := <-alice.Messages():
			_ = in.Ack()
			if in.Kind != protocol.DeliveryChannel {
				continue
			}
			if in.Text() != "from the page itself" {
				t.Fatalf("alice got %q: a refused post reached the mesh", in.Text())
			}
			return
		case <-time.After(15 * time.Second):
			t.Fatal("alice did not get the page's own post")
		}
	}
}

// TestRemoteTokenCookie: with --allow-remote nothing loads without the token, opening the
// printed URL sets it as an HttpOnly, SameSite=Strict cookie and redirects to the page
// without it, and that cookie then opens every route.
func TestRemoteTokenCookie(t *testing.T) {
	mesh := openMesh(t)
	peer(t, mesh, "alice", "team")
	page := startWeb(t, mesh, "--allow-remote", "--host", "127.0.0.1")
	i := strings.Index(page, "?token=")
	if i < 0 {
		t.Fatalf("page URL %q carries no token", page)
	}
	base, token := page[:i], page[i+len("?token="):]
	for _, r := range routes {
		if st, code, _, body := do(t, base, r.method, r.path, "", r.body, map[string]string{"Content-Type": "application/json"}); st != 401 || code != "token" || strings.Contains(body, "alice") {
			t.Errorf("%s %s without the token: %d %s, want 401 token", r.method, r.path, st, code)
		}
	}
	req, _ := http.NewRequest("GET", page, nil)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("opening the token URL: %d to %q, want 303 to /", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Value == token {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("cookie %+v, want the token, HttpOnly, SameSite=Strict, Path=/", cookie)
	}
	for _, r := range routes {
		h := map[string]string{"Cookie": cookie.Name + "=" + cookie.Value, "Content-Type": "application/json"}
		if st, code, _, _ := do(t, base, r.method, r.path, "", r.body, h); st != 200 {
			t.Errorf("%s %s with the cookie: %d %s, want 200", r.method, r.path, st, code)
		}
		h["Cookie"] = cookie.Name + "=" + strings.Repeat("0", len(token))
		if st, _, _, _ := do(t, base, r.method, r.path, "", r.body, h); st != 401 {
			t.Errorf("%s %s with a wrong cookie: %d, want 401", r.method, r.path, st)
		}
	}
	// Host is checked with the token too: the token does not open the door to a rebound page.
	u, _ := url.Parse(base)
	if st, code, _, _ := do(t, base, "GET", "/api/meta?token="+token, "evil.example:"+u.Port(), "", nil); st != 421 {
		t.Errorf("token with a foreign Host: %d %s, want 421", st, code)
	}
}
