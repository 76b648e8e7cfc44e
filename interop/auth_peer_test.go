package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/ledger"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/trust/trusttest"
)

// authDeadline guards every wait of the auth tests against a hang.
const authDeadline = 10 * time.Second

const (
	authSpace = "team"
	authIdP   = "https://idp.test"
)

// peerIdP accepts "idtok" as (authIdP, "alice-sub").
type peerIdP struct{}

func (peerIdP) VerifyIDToken(_ context.Context, raw string) (string, string, error) {
	if raw != "idtok" {
		return "", "", errors.New("unknown id token")
	}
	return authIdP, "alice-sub", nil
}

// authLane runs the auth service of authSpace, with a public face, on a real broker, alice
// (subject alice-sub) granted on channel general. It returns the mesh and the state folder.
func authLane(t *testing.T) (*meshtest.Mesh, string) {
	t.Helper()
	chain, err := trust.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.UserAuth(authSpace); err != nil {
		t.Fatal(err)
	}
	m := meshtest.Serve(t, chain)
	kv := meshtest.AuthBucket(t, m.Provision(authSpace, provision.Options{}), authSpace)
	if _, err := ledger.Grant(t.Context(), kv, ledger.Row{Actor: "alice", Subjects: []string{"alice-sub"},
		AllowSubscribe: []string{"general"}, AllowPublish: []string{"general"}}); err != nil {
		t.Fatal(err)
	}
	lane := &authsvc.Lane{Space: authSpace, Server: m.URL, Chain: chain, IdP: peerIdP{}, IdPIssuer: authIdP,
		IdPClientID: authIdP, Public: &exchange.PublicFace{}, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan error, 1), make(chan struct{})
	go func() { done <- lane.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(authDeadline):
			t.Error("auth service did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("auth service: %v", err)
	case <-time.After(authDeadline):
		t.Fatal("auth service not ready")
	}
	return m, authsvc.StateDir(chain.Dir(), authSpace)
}

// readJSONFile decodes a JSON file of dir into a map.
func readJSONMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// post sends body to url/exchange as the reference's client does.
func post(t *testing.T, url, capability string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/exchange", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	if capability != "" {
		req.Header.Set("authorization", "Bearer "+capability)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, readJSONMap(t, b)
}

// TestForeignPersonConnects is a foreign peer (net/http and raw nats.go only) signing in
// the reference's way: it reads auth-service.json, exchanges {idpToken, actor} (with the
// reference client's ttlSec) for {token, owner, exp}, connects with the space's sentinel
// creds FILE plus the bearer as token under an ibx connection name, and gets a JetStream
// ack on _INBOX_<name>. The broker reports it as the user <owner>-<actor>; a connect
// without an inbox name is refused.
func TestForeignPersonConnects(t *testing.T) {
	m, dir := authLane(t)
	var st struct {
		Ver int    `json:"ver"`
		URL string `json:"url"`
		PID int    `json:"pid"`
		Cap string `json:"cap"`
	}
	raw, err := readFile(filepath.Join(dir, authsvc.StatusFile))
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Ver != 1 || st.URL == "" || st.Cap == "" || st.PID == 0 {
		t.Fatalf("auth-service.json %s: %v", raw, err)
	}

	// The reference's error body for a body without idpToken.
	code, eb := post(t, st.URL, st.Cap, []byte(`{"actor":"alice"}`))
	want := readJSONMap(t, authFixture(t, "exchange-error.json"))
	if code != http.StatusBadRequest || eb["error"] != want["error"] {
		t.Fatalf("error %d %v, want 400 %v", code, eb, want)
	}

	body := bytes.Replace(authFixture(t, "exchange-request-human.json"), []byte("<IdP ID token>"), []byte("idtok"), 1)
	code, xr := post(t, st.URL, st.Cap, body)
	if code != http.StatusOK {
		t.Fatalf("exchange: %d %v", code, xr)
	}
	for k, v := range readJSONMap(t, authFixture(t, "exchange-response.json")) {
		if got, ok := xr[k]; !ok || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", v) {
			t.Fatalf("answer %v: field %s missing or not a %T", xr, k, v)
		}
	}
	token, owner := xr["token"].(string), xr["owner"].(string)
	if exp := int64(xr["exp"].(float64)); exp < time.Now().Add(590*time.Second).Unix() || exp > time.Now().Add(601*time.Second).Unix() {
		t.Fatalf("exp %d: want unix seconds about 600 s ahead (ttlSec 600)", exp)
	}

	creds := filepath.Join(dir, "sentinel.creds")
	if _, err := nats.Connect(m.URL, nats.UserCredentials(creds), nats.Token(token), nats.Timeout(authDeadline), nats.NoReconnect()); err == nil {
		t.Fatal("a connect without an inbox name was admitted")
	}
	ibx := "ibx" + strings.Repeat("0123456789abcdef", 2)
	nc, err := nats.Connect(m.URL, nats.UserCredentials(creds), nats.Token(token), nats.Name(ibx),
		nats.CustomInboxPrefix("_INBOX_"+ibx), nats.Timeout(authDeadline), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("_INBOX_" + ibx + ".ack")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(fmt.Sprintf("cotal.%s.chat.%s.alice.general", authSpace, owner), "_INBOX_"+ibx+".ack", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	ack, err := sub.NextMsg(authDeadline)
	if err != nil {
		t.Fatalf("no ack on _INBOX_%s: %v", ibx, err)
	}
	var pa struct {
		Stream string `json:"stream"`
		Seq    uint64 `json:"seq"`
	}
	if json.Unmarshal(ack.Data, &pa) != nil || pa.Stream != "CHAT_"+authSpace || pa.Seq == 0 {
		t.Fatalf("ack %s", ack.Data)
	}

	// CONNZ names the connection's user <owner>-<actor>, as the reference's callout does.
	sys := meshtest.SystemConn(t, m.Chain, m.URL)
	pages, err := connz.Ask(t.Context(), sys, "$SYS.REQ.SERVER.PING.CONNZ", map[string]any{"auth": true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, p := range pages {
		for _, c := range p.Conns {
			users = append(users, c.User)
		}
	}
	if !slices.Contains(users, owner+"-alice") {
		t.Fatalf("authorized users %v lack %s-alice", users, owner)
	}
}

// TestAuthServiceFile: Go reads the reference's auth-service.json, and the one Go writes
// holds every field the reference's loader requires, with the same types.
func TestAuthServiceFile(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(filepath.Join(dir, authsvc.StatusFile), authFixture(t, "auth-service.json")); err != nil {
		t.Fatal(err)
	}
	st, err := authsvc.ReadStatus(dir)
	if err != nil || st.Ver != 1 || st.URL != "http://127.0.0.1:41234" || st.PID != 4242 || len(st.Cap) != 64 || st.PublicURL != "https://mesh.example.com/cotal" {
		t.Fatalf("reference auth-service.json: %+v %v", st, err)
	}

	_, live := authLane(t)
	b, err := readFile(filepath.Join(live, authsvc.StatusFile))
	if err != nil {
		t.Fatal(err)
	}
	got, want := readJSONMap(t, b), readJSONMap(t, authFixture(t, "auth-service.json"))
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || fmt.Sprintf("%T", g) != fmt.Sprintf("%T", want[k]) {
			t.Errorf("Go's auth-service.json %s: field %s missing or not a %T", b, k, want[k])
		}
	}
	if got["ver"] != 1.0 {
		t.Errorf("ver %v, want 1", got["ver"])
	}
}

// TestDiscoveryBundle: Go decodes the reference's bundle (managerAuthorityUrl, no jwksUrl,
// policy), and the bundle Go's public face serves has the reference's shape: the same keys
// at every level (Go adds only endpoints.jwksUrl) except managerAuthorityUrl, which Go does
// not advertise because it does not serve that route: a POST there (where a reference
// client derives it from the base URL) answers 501 with the fixture's body, byte for byte.
func TestDiscoveryBundle(t *testing.T) {
	creds := trusttest.SentinelCreds(t)
	credsJSON, _ := json.Marshal(creds)
	ref := bytes.Replace(authFixture(t, "bundle.json"), []byte(`"<SENTINEL_CREDS>"`), credsJSON, 1)
	b, err := exchangewire.DecodeBundle(ref)
	if err != nil {
		t.Fatalf("reference bundle: %v", err)
	}
	ep := b.UserAuth.Endpoints
	if ep.ManagerAuthorityURL != "https://mesh.example.com/cotal/manager-service-authority" || ep.JWKS() != "https://mesh.example.com/cotal/jwks" ||
		b.UserAuth.IdP.Issuer != "https://idp.example" || b.Policy == nil || b.Policy.Events != "required" {
		t.Fatalf("decoded %+v", b)
	}

	_, dir := authLane(t)
	st, err := authsvc.ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(st.PublicURL + exchangewire.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	served, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, want := readJSONMap(t, served), readJSONMap(t, ref)
	delete(want, "policy") // optional; Go's face sets none
	sameKeys(t, "bundle", got, want, map[string]bool{"userAuth.endpoints.jwksUrl": true, "userAuth.endpoints.agentProvisioningUrl": true,
		"userAuth.endpoints.managerAuthorityUrl": true})
	gep := got["userAuth"].(map[string]any)["endpoints"].(map[string]any)
	if m, ok := gep["managerAuthorityUrl"]; ok {
		t.Errorf("managerAuthorityUrl %v advertised, but the route is not served", m)
	}

	// The route a reference client derives: Go's answer is the fixture, which decodes as
	// the reference's {error} body.
	refusal := authFixture(t, "manager-authority-refusal.json")
	var eb exchangewire.ErrorBody
	if err := json.Unmarshal(refusal, &eb); err != nil || eb.Sentence() == "" || eb.Code != "not_supported" {
		t.Fatalf("fixture decodes to %+v, %v", eb, err)
	}
	body := `{"idpToken":"x","request":{"v":1,"kind":"manager-service-authority","operation":"prepare"}}`
	mres, err := http.Post(st.PublicURL+exchange.ManagerAuthorityPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer mres.Body.Close()
	mgot, err := io.ReadAll(mres.Body)
	if err != nil {
		t.Fatal(err)
	}
	if mres.StatusCode != http.StatusNotImplemented || !bytes.Equal(mgot, refusal) {
		t.Fatalf("POST %s: %d %s\nwant 501 %s", exchange.ManagerAuthorityPath, mres.StatusCode, mgot, refusal)
	}
}

// sameKeys fails unless got and want have the same keys at every object level, except
// the dotted paths in optional, which either may lack.
func sameKeys(t *testing.T, path string, got, want map[string]any, optional map[string]bool) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		p := strings.TrimPrefix(path+"."+k, "bundle.")
		g, ok := got[k]
		if !ok {
			if !optional[p] {
				t.Errorf("%s missing", p)
			}
			continue
		}
		if wm, ok := want[k].(map[string]any); ok {
			gm, ok := g.(map[string]any)
			if !ok {
				t.Errorf("%s: not an object", p)
				continue
			}
			sameKeys(t, path+"."+k, gm, wm, optional)
		}
	}
	for k := range got {
		p := strings.TrimPrefix(path+"."+k, "bundle.")
		if _, ok := want[k]; !ok && !optional[p] {
			t.Errorf("%s: not in the reference's bundle", p)
		}
	}
}
