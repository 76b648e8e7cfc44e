package cli_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/exchangewire"
)

// cmdBundle serves discovery bundles from this test process on loopback until the script
// ends, and sets $VAR to the public base URL:
//
//	bundle serve VAR SPACE   a valid bundle of SPACE (IdP http://127.0.0.1:5556, audience cotal)
//	bundle invalid VAR       a JSON object that is not a valid bundle
//	bundle gone VAR          a loopback URL where nothing listens
func cmdBundle(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || (args[0] == "serve") != (len(args) == 3) ||
		(args[0] != "serve" && args[0] != "invalid" && args[0] != "gone") {
		ts.Fatalf("usage: bundle serve VAR SPACE | bundle invalid VAR | bundle gone VAR")
	}
	if args[0] == "gone" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ts.Fatalf("listen: %v", err)
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			ts.Fatalf("close: %v", err)
		}
		ts.Setenv(args[1], "http://"+addr)
		return
	}
	var body any = map[string]string{"space": "team"}
	srv := httptest.NewUnstartedServer(nil) // loopback; its address is known before Start
	if args[0] == "serve" {
		base := "http://" + srv.Listener.Addr().String()
		body = exchangewire.Bundle{Space: args[2], Server: "nats://127.0.0.1:4222",
			UserAuth: exchangewire.UserAuth{Provider: exchangewire.BundleProvider,
				IdP:       exchangewire.BundleIdP{URL: "http://127.0.0.1:5556", Issuer: "http://127.0.0.1:5556", Audience: "cotal"},
				Endpoints: exchangewire.Endpoints{URL: base, JWKSURL: base + "/jwks"}},
			SentinelCreds: sentinelCreds(ts)}
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != exchangewire.BundlePath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body) // a failed write is the client's to report
	})
	srv.Start()
	ts.Defer(srv.Close)
	ts.Setenv(args[1], srv.URL)
}

// sentinelCreds is a deny-all user creds file signed by a fresh account key.
func sentinelCreds(ts *testscript.TestScript) string {
	acct, err := nkeys.CreateAccount()
	ts.Check(err)
	user, err := nkeys.CreateUser()
	ts.Check(err)
	upub, err := user.PublicKey()
	ts.Check(err)
	uc := jwt.NewUserClaims(upub)
	uc.Name = "sentinel"
	uc.Pub.Deny.Add(">")
	uc.Sub.Deny.Add(">")
	tok, err := uc.Encode(acct)
	ts.Check(err)
	seed, err := user.Seed()
	ts.Check(err)
	creds, err := jwt.FormatUserConfig(tok, seed)
	ts.Check(err)
	return string(creds)
}
