package meshreg

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/trust/trusttest"
)

// goodEntry is a valid entry; each case of TestDecode breaks one thing.
func goodEntry(t testing.TB, creds string) Entry {
	return Entry{Space: "team", Server: "tls://nats.example.com:4222", TLSRequired: true,
		IdPIssuer: "https://idp.example.com", IdPClientID: "cotal",
		ExchangeURL: "https://mesh.example.com/cotal", JWKSURL: "https://mesh.example.com/cotal/jwks",
		AgentProvisioningURL: "https://mesh.example.com/provision", SentinelCreds: creds, AddedAt: testclock.Epoch(t)}
}

func encode(t testing.TB, e Entry) string {
	t.Helper()
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecode(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	with := func(edit func(*Entry)) string {
		e := goodEntry(t, creds)
		edit(&e)
		return encode(t, e)
	}
	good := encode(t, goodEntry(t, creds))
	cases := []struct {
		name string
		in   string
		msg  string // empty: accepted
	}{
		{"good", good, ""},
		{"loopback http", with(func(e *Entry) {
			e.ExchangeURL, e.JWKSURL, e.Server, e.TLSRequired = "http://127.0.0.1:8080", "http://127.0.0.1:8080/jwks", "nats://127.0.0.1:4222", false
		}), ""},
		{"no provisioning", with(func(e *Entry) { e.AgentProvisioningURL = "" }), ""},
		{"unknown field", strings.Replace(good, `"space"`, `"extra": 1, "space"`, 1), "unknown field"},
		{"trailing data", good + "{}", "data after"},
		{"not json", "nope", "decode mesh entry"},
		{"no tlsRequired", strings.Replace(good, `"tlsRequired": true,`, "", 1), "tlsRequired is required"},
		{"bad space", with(func(e *Entry) { e.Space = "a.b" }), "space"},
		{"bad server", with(func(e *Entry) { e.Server = "http://x" }), "server"},
		{"tls without tlsRequired", with(func(e *Entry) { e.TLSRequired = false }), "contradicts"},
		{"server user", with(func(e *Entry) { e.Server = "nats://u:p@x:4222" }), "must not carry a user"},
		{"server empty port", with(func(e *Entry) { e.Server = "nats://x:" }), "empty port"},
		{"no issuer", with(func(e *Entry) { e.IdPIssuer = "" }), "idpIssuer"},
		{"no client id", with(func(e *Entry) { e.IdPClientID = "" }), "idpClientId"},
		{"plain http exchange", with(func(e *Entry) { e.ExchangeURL = "http://mesh.example.com" }), "exchangeUrl"},
		{"exchange trailing slash", with(func(e *Entry) { e.ExchangeURL += "/" }), "not canonical"},
		{"exchange query", with(func(e *Entry) { e.ExchangeURL += "?x=1" }), "not canonical"},
		{"plain http jwks", with(func(e *Entry) { e.JWKSURL = "http://mesh.example.com/jwks" }), "jwksUrl"},
		{"http provisioning", with(func(e *Entry) { e.AgentProvisioningURL = "http://127.0.0.1/p" }), "agentProvisioningUrl"},
		{"no creds", with(func(e *Entry) { e.SentinelCreds = "" }), "sentinelCreds: creds"},
		{"bad creds", with(func(e *Entry) { e.SentinelCreds = "junk" }), "sentinelCreds"},
		{"no addedAt", with(func(e *Entry) { e.AddedAt = time.Time{} }), "addedAt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Decode([]byte(c.in))
			if c.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := encode(t, e); got != c.in {
					t.Fatalf("round trip:\n%s\nwant\n%s", got, c.in)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err %v, want %q", err, c.msg)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	creds := trusttest.SentinelCreds(f)
	f.Add(encode(f, goodEntry(f, creds)))
	f.Add(`{"space":"x","tlsRequired":false}`)
	f.Add(`{}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, in string) {
		e, err := Decode([]byte(in))
		if err != nil {
			return
		}
		out := encode(t, e)
		e2, err := Decode([]byte(out))
		if err != nil {
			t.Fatalf("%q decoded to %+v, whose encoding %q is refused: %v", in, e, out, err)
		}
		if again := encode(t, e2); again != out {
			t.Fatalf("encoding not stable: %q then %q", out, again)
		}
	})
}

func TestFromBundle(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	b := exchangewire.Bundle{Space: "team", Server: "tls://nats.example.com:4222", TLSRequired: true,
		UserAuth: exchangewire.UserAuth{Provider: exchangewire.BundleProvider,
			IdP: exchangewire.BundleIdP{URL: "https://idp.example.com", Issuer: "https://idp.example.com", Audience: "cotal"},
			Endpoints: exchangewire.Endpoints{URL: "https://mesh.example.com/cotal", JWKSURL: "https://mesh.example.com/cotal/jwks",
				AgentProvisioningURL: "https://mesh.example.com/provision"}},
		SentinelCreds: creds}
	e, err := FromBundle(b, "https://mesh.example.com/cotal/?q=1#f", testclock.Epoch(t).Add(123*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if want := goodEntry(t, creds); !reflect.DeepEqual(e, want) {
		t.Fatalf("entry %+v\nwant %+v", e, want)
	}
	if _, err := FromBundle(b, "http://mesh.example.com", testclock.Epoch(t)); err == nil {
		t.Fatal("plain http base accepted")
	}
}

// TestFromReferenceBundle: a bundle whose IdP is pinned the reference's way (url the base,
// issuer = audience = its origin) keeps the base URL, signs in the reference's way, and
// survives the entry file; an OIDC bundle keeps no URL beside its issuer.
func TestFromReferenceBundle(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	b := exchangewire.Bundle{Space: "team", Server: "tls://nats.example.com:4222", TLSRequired: true,
		UserAuth: exchangewire.UserAuth{Provider: exchangewire.BundleProvider,
			IdP:       exchangewire.BundleIdP{URL: "https://idp.example.com/api/auth", Issuer: "https://idp.example.com", Audience: "https://idp.example.com"},
			Endpoints: exchangewire.Endpoints{URL: "https://mesh.example.com/cotal", ManagerAuthorityURL: "https://mesh.example.com/cotal/manager-service-authority"}},
		SentinelCreds: creds}
	e, err := FromBundle(b, "https://mesh.example.com/cotal", testclock.Epoch(t))
	if err != nil {
		t.Fatal(err)
	}
	if e.IdPURL != "https://idp.example.com/api/auth" || !e.ReferenceIdP() || e.LoginURL() != "https://idp.example.com/api/auth" {
		t.Fatalf("entry %+v", e)
	}
	back, err := Decode([]byte(encode(t, e)))
	if err != nil || back.IdPURL != e.IdPURL {
		t.Fatalf("decoded %+v %v", back, err)
	}
	b.UserAuth.IdP = exchangewire.BundleIdP{URL: "https://idp.example.com/realms/t", Issuer: "https://idp.example.com/realms/t", Audience: "cotal"}
	e, err = FromBundle(b, "https://mesh.example.com/cotal", testclock.Epoch(t))
	if err != nil || e.IdPURL != "" || e.ReferenceIdP() || e.LoginURL() != "https://idp.example.com/realms/t" {
		t.Fatalf("OIDC entry %+v %v", e, err)
	}
}

func TestRegistry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "meshes")
	creds := trusttest.SentinelCreds(t)
	e := goodEntry(t, creds)

	if l, err := List(dir); err != nil || len(l) != 0 {
		t.Fatalf("empty list: %v %v", l, err)
	}
	if _, err := Get(dir, "team"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of nothing: %v", err)
	}
	if err := Remove(dir, "team"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove of nothing: %v", err)
	}
	if err := Add(dir, e, false); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "team.json"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
	if got, err := Get(dir, "team"); err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("get: %+v %v", got, err)
	}

	// Re-adding the same settings later keeps the first AddedAt.
	later := e
	later.AddedAt = testclock.Epoch(t).Add(time.Hour)
	if err := Add(dir, later, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := Get(dir, "team"); !got.AddedAt.Equal(testclock.Epoch(t)) {
		t.Fatalf("addedAt changed to %v", got.AddedAt)
	}

	// Other settings from the same URL need force.
	rotated := e
	rotated.SentinelCreds = trusttest.SentinelCreds(t)
	var exists *ExistsError
	if err := Add(dir, rotated, false); !errors.As(err, &exists) || !reflect.DeepEqual(exists.Changed, []string{"sentinelCreds"}) {
		t.Fatalf("changed entry without force: %v", err)
	}
	if err := Add(dir, rotated, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := Get(dir, "team"); got.SentinelCreds != rotated.SentinelCreds {
		t.Fatal("force did not replace the entry")
	}

	// Another URL is refused, force or not.
	moved := e
	moved.ExchangeURL, moved.JWKSURL = "https://other.example.com", "https://other.example.com/jwks"
	for _, force := range []bool{false, true} {
		var pinned *PinnedError
		if err := Add(dir, moved, force); !errors.As(err, &pinned) || pinned.Pinned != e.ExchangeURL ||
			!strings.Contains(err.Error(), "cotal meshes rm team") {
			t.Fatalf("moved entry (force %v): %v", force, err)
		}
	}

	// An invalid entry is never written.
	bad := e
	bad.Space = "other"
	bad.SentinelCreds = ""
	if err := Add(dir, bad, true); err == nil {
		t.Fatal("invalid entry added")
	}

	second := e
	second.Space = "alpha"
	if err := Add(dir, second, false); err != nil {
		t.Fatal(err)
	}
	// Temp files of an atomic write and other names are skipped.
	if err := os.WriteFile(filepath.Join(dir, ".team.json.tmp-1"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := List(dir)
	if err != nil || len(l) != 2 || l[0].Space != "alpha" || l[1].Space != "team" {
		t.Fatalf("list: %+v %v", l, err)
	}

	if err := Remove(dir, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(dir, "team"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after remove: %v", err)
	}
	// A new URL is accepted once the entry is gone.
	if err := Add(dir, moved, false); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptEntries(t *testing.T) {
	dir := t.TempDir()
	creds := trusttest.SentinelCreds(t)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A file whose space is not its name.
	write("team.json", encode(t, goodEntryNamed(t, creds, "other")))
	if _, err := Get(dir, "team"); err == nil || !strings.Contains(err.Error(), `records space "other"`) {
		t.Fatalf("misnamed entry: %v", err)
	}
	if _, err := List(dir); err == nil || !strings.Contains(err.Error(), "team.json") {
		t.Fatalf("list with a misnamed entry: %v", err)
	}
	// Remove works on a corrupt entry, so the way out the errors name works.
	if err := Remove(dir, "team"); err != nil {
		t.Fatal(err)
	}
	write("a.b.json", "{}")
	if _, err := List(dir); err == nil || !strings.Contains(err.Error(), "not a space name") {
		t.Fatalf("list with a bad file name: %v", err)
	}
	if _, err := Get(dir, "../x"); err == nil {
		t.Fatal("path outside the registry accepted")
	}
	if err := Add(dir, goodEntryNamed(t, creds, "x/../y"), false); err == nil {
		t.Fatal("bad space accepted")
	}
}

func goodEntryNamed(t testing.TB, creds, space string) Entry {
	e := goodEntry(t, creds)
	e.Space = space
	return e
}
