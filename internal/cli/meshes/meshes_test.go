package meshes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/cli/cmdtest"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/testclock"
	"github.com/cotal-ai/cotal/meshreg"
	"github.com/cotal-ai/cotal/trust/trusttest"
)

func TestNewCmdAdd(t *testing.T) {
	tests := []struct {
		args    []string
		want    AddOptions
		wantErr string
	}{
		{args: []string{"team", "--from", "https://mesh.example.com"}, want: AddOptions{Space: "team", From: "https://mesh.example.com"}},
		{args: []string{"team", "--from", "http://127.0.0.1:8443/x/", "--force"}, want: AddOptions{Space: "team", From: "http://127.0.0.1:8443/x/", Force: true}},
		{args: []string{"team"}, wantErr: "--from is required"},
		{args: []string{"team", "--from", "http://mesh.example.com"}, wantErr: "--from: bundle URL"},
		{args: []string{"team", "--from", "ftp://mesh.example.com"}, wantErr: "--from: bundle URL"},
		{args: []string{"team", "--from", "mesh.example.com"}, wantErr: "--from: bundle URL"},
		{args: []string{"a.b", "--from", "https://mesh.example.com"}, wantErr: "invalid space"},
		{args: []string{"--from", "https://mesh.example.com"}, wantErr: "accepts 1 arg"},
		{args: []string{"a", "b", "--from", "https://mesh.example.com"}, wantErr: "accepts 1 arg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := cmdtest.Capture(NewCmdAdd, tt.args)
			if !cmdtest.Parsed(t, err, got != nil, tt.wantErr) {
				return
			}
			if got.Space != tt.want.Space || got.From != tt.want.From || got.Force != tt.want.Force {
				t.Fatalf("opts %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewCmdListRm(t *testing.T) {
	if o, err := cmdtest.Capture(NewCmdList, []string{"--json"}); err != nil || !o.JSON {
		t.Fatalf("list: %+v %v", o, err)
	}
	if _, err := cmdtest.Capture(NewCmdList, []string{"x"}); err == nil {
		t.Fatal("list took an argument")
	}
	if o, err := cmdtest.Capture(NewCmdRm, []string{"team"}); err != nil || o.Space != "team" {
		t.Fatalf("rm: %+v %v", o, err)
	}
	var fe *cmdutil.FlagError
	if o, err := cmdtest.Capture(NewCmdRm, []string{"../x"}); !errors.As(err, &fe) || o != nil {
		t.Fatalf("rm ../x: %v", err)
	}
	if _, err := cmdtest.Capture(NewCmdRm, nil); err == nil {
		t.Fatal("rm without a space")
	}
}

// serve starts a loopback public face answering the bundle path with body() as JSON.
func serve(t *testing.T, body func(base string) any) string {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != exchangewire.BundlePath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(body(srv.URL)); err != nil {
			t.Errorf("encode bundle: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func bundle(space, base, audience, creds string) exchangewire.Bundle {
	return exchangewire.Bundle{Space: space, Server: "nats://127.0.0.1:4222",
		UserAuth: exchangewire.UserAuth{Provider: exchangewire.BundleProvider,
			IdP:       exchangewire.BundleIdP{URL: "http://127.0.0.1:5556", Issuer: "http://127.0.0.1:5556", Audience: audience},
			Endpoints: exchangewire.Endpoints{URL: base, JWKSURL: base + "/jwks"}},
		SentinelCreds: creds}
}

func TestRunAdd(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	dir := filepath.Join(t.TempDir(), "meshes")
	audience := "cotal"
	good := serve(t, func(base string) any { return bundle("team", base, audience, creds) })
	other := serve(t, func(base string) any { return bundle("team", base, "cotal", creds) })
	wrong := serve(t, func(base string) any { return bundle("prod", base, "cotal", creds) })
	invalid := serve(t, func(string) any { return map[string]string{"space": "team"} })
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	add := func(from string, force bool) (string, string, error) {
		ios, _, out, errOut := iostreams.Test()
		err := runAdd(t.Context(), &AddOptions{IO: ios, Dir: func() (string, error) { return dir, nil },
			Space: "team", From: from, Force: force})
		return out.String(), errOut.String(), err
	}
	refusal := func(err error, why, next string) {
		t.Helper()
		var r *cmdutil.Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Why, why) || !strings.Contains(r.Next, next) {
			t.Fatalf("err %v, want a refusal because %q, next %q", err, why, next)
		}
	}

	_, _, err := add(gone.URL, false)
	refusal(err, "could not be fetched", "cotal meshes add team --from")
	_, _, err = add(invalid, false)
	refusal(err, "no valid discovery bundle", "cotal meshes add team --from")
	_, _, err = add(wrong, false)
	refusal(err, `its bundle is for space "prod", not "team"`, "cotal meshes add prod --from "+wrong)
	if l, err := meshreg.List(dir); err != nil || len(l) != 0 {
		t.Fatalf("a refused add left %v (%v)", l, err)
	}

	out, _, err := add(good+"/", false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "✓ registered mesh team: server nats://127.0.0.1:4222, sign in with cotal login --idp http://127.0.0.1:5556\n"; out != want {
		t.Fatalf("out %q, want %q", out, want)
	}
	e, err := meshreg.Get(dir, "team")
	if err != nil || e.ExchangeURL != good || e.JWKSURL != good+"/jwks" || e.SentinelCreds != creds {
		t.Fatalf("entry %+v, %v", e, err)
	}
	if _, _, err := add(good, false); err != nil {
		t.Fatalf("re-add of the same bundle: %v", err)
	}

	_, _, err = add(other, true)
	refusal(err, "is registered from "+good, "cotal meshes rm team; cotal meshes add team --from "+other)

	audience = "cotal-team"
	_, _, err = add(good, false)
	refusal(err, "[idpClientId]", "--force")
	out, _, err = add(good, true)
	if err != nil || !strings.HasSuffix(out, "cotal login --idp http://127.0.0.1:5556 --client-id cotal-team\n") {
		t.Fatalf("forced add: %q %v", out, err)
	}
}

func TestRunListRm(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	dir := t.TempDir()
	run := func(f func(*iostreams.IOStreams) error) (string, string, error) {
		ios, _, out, errOut := iostreams.Test()
		err := f(ios)
		return out.String(), errOut.String(), err
	}
	dirF := func() (string, error) { return dir, nil }
	list := func(asJSON bool) (string, string, error) {
		return run(func(ios *iostreams.IOStreams) error {
			return runList(context.Background(), &ListOptions{IO: ios, Dir: dirF, JSON: asJSON})
		})
	}
	rm := func(space string) (string, string, error) {
		return run(func(ios *iostreams.IOStreams) error {
			return runRm(context.Background(), &RmOptions{IO: ios, Dir: dirF, Space: space})
		})
	}
	if out, errOut, err := list(false); err != nil || out != "" || !strings.Contains(errOut, "no remote meshes registered") {
		t.Fatalf("empty list: %q %q %v", out, errOut, err)
	}
	if out, _, err := list(true); err != nil || out != "[]\n" {
		t.Fatalf("empty json list: %q %v", out, err)
	}
	e, err := meshreg.FromBundle(bundle("team", "http://127.0.0.1:9", "cotal", creds), "http://127.0.0.1:9", testclock.Epoch(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := meshreg.Add(dir, e, false); err != nil {
		t.Fatal(err)
	}
	if out, _, err := list(false); err != nil || strings.Join(strings.Fields(out), " ") !=
		"SPACE SERVER IDP URL team nats://127.0.0.1:4222 http://127.0.0.1:5556 http://127.0.0.1:9" {
		t.Fatalf("list: %q %v", out, err)
	}
	out, _, err := list(true)
	var views []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &views) != nil || len(views) != 1 || views[0]["space"] != "team" {
		t.Fatalf("json list: %q %v", out, err)
	}
	if _, ok := views[0]["sentinelCreds"]; ok {
		t.Fatal("json list prints the sentinel creds")
	}
	if out, _, err := rm("team"); err != nil || out != "removed mesh team\n" {
		t.Fatalf("rm: %q %v", out, err)
	}
	var r *cmdutil.Refusal
	if _, _, err := rm("team"); !errors.As(err, &r) || r.Next != "cotal meshes list" {
		t.Fatalf("rm of nothing: %v", err)
	}
}

// TestRunAddReferenceBundle: a bundle as the TypeScript reference's public face composes it
// (service.ts composeUserBundle: endpoints {url, managerAuthorityUrl}, no jwksUrl,
// tlsRequired always true, the optional policy, a field Go does not know) is registered.
func TestRunAddReferenceBundle(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	dir := filepath.Join(t.TempDir(), "meshes")
	from := serve(t, func(base string) any {
		return map[string]any{
			"space": "team", "server": "nats://127.0.0.1:4222", "tlsRequired": true,
			"userAuth": map[string]any{"provider": "cotal",
				"idp":       map[string]any{"url": "http://127.0.0.1:5556/api/auth", "issuer": "http://127.0.0.1:5556", "audience": "http://127.0.0.1:5556"},
				"endpoints": map[string]any{"url": base, "managerAuthorityUrl": base + "/manager-service-authority"}},
			"sentinelCreds": creds,
			"policy":        map[string]any{"events": "required"},
			"futureField":   map[string]any{"anything": 1},
		}
	})
	ios, _, _, _ := iostreams.Test()
	if err := runAdd(t.Context(), &AddOptions{IO: ios, Dir: func() (string, error) { return dir, nil }, Space: "team", From: from}); err != nil {
		t.Fatalf("reference bundle refused: %v", err)
	}
	e, err := meshreg.Get(dir, "team")
	if err != nil || e.ExchangeURL != from || e.JWKSURL != from+"/jwks" || e.ManagerAuthorityURL != from+"/manager-service-authority" ||
		e.IdPIssuer != "http://127.0.0.1:5556" || e.IdPClientID != "http://127.0.0.1:5556" || e.SentinelCreds != creds || !e.TLSRequired {
		t.Fatalf("entry %+v, %v", e, err)
	}
}
