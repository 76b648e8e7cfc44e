package cli_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdA2AReplier plays an agent holding a creds file (cotal mint) on the script project's
// mesh and first space: it joins and answers every message it receives with REPLY (a DM
// to the sender, replyTo the message) until the script ends.
//
//	a2areplier CREDS REPLY
func cmdA2AReplier(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: a2areplier CREDS REPLY")
	}
	var mesh struct {
		Server string   `json:"server"`
		Spaces []string `json:"spaces"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh); err != nil || len(mesh.Spaces) == 0 {
		ts.Fatalf("mesh.json: %v (spaces %v)", err, mesh.Spaces)
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("a2areplier: %v", err)
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		ts.Fatalf("a2areplier: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.Defer(cancel)
	jctx, jcancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard
	defer jcancel()
	ep, err := client.Connect(jctx, mesh.Server, client.Config{Space: mesh.Spaces[0], Owner: c.Principal.Owner, Actor: c.Principal.Actor,
		Name: c.Principal.Actor, Role: c.Role, LifecycleUID: c.LifecycleUID, Description: c.Principal.Actor + " answers A2A callers"}, c.Options()...)
	if err != nil {
		ts.Fatalf("a2areplier connect: %v", err)
	}
	ts.Defer(func() { _ = ep.Close() })
	if err := ep.Join(jctx); err != nil {
		ts.Fatalf("a2areplier join: %v", err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case in, ok := <-ep.Messages():
				if !ok {
					return
				}
				if from, err := protocol.ParsePrincipal(in.From.ID); err == nil {
					_, _ = ep.DM(ctx, from, client.Draft{Parts: []protocol.Part{protocol.TextPart(args[1])}, ReplyTo: in.ID})
				}
				_ = in.Ack()
			}
		}
	}()
}

// cmdA2AHTTP sends one request to the gateway the script started (its URL is in
// .cotal/a2a/serve.url) and prints "status N" and the body. -host sends another Host
// header, -origin an Origin, -bearer an Authorization: Bearer token; -ca trusts that CA
// file (a gateway serving TLS).
//
//	a2ahttp [-host H] [-origin O] [-bearer T] [-ca FILE] GET PATH
//	a2ahttp [-host H] [-origin O] [-bearer T] [-ca FILE] POST PATH BODY
func cmdA2AHTTP(ts *testscript.TestScript, neg bool, args []string) {
	host, origin, bearer, ca := "", "", "", ""
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-host":
			host = args[1]
		case "-origin":
			origin = args[1]
		case "-bearer":
			bearer = args[1]
		case "-ca":
			ca = args[1]
		default:
			ts.Fatalf("a2ahttp: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if neg || len(args) < 2 || (args[0] == "GET") != (len(args) == 2) {
		ts.Fatalf("usage: a2ahttp [-host H] [-origin O] [-bearer T] [-ca FILE] (GET PATH | POST PATH BODY)")
	}
	body := ""
	if len(args) == 3 {
		body = args[2]
	}
	base := strings.TrimSpace(ts.ReadFile(".cotal/a2a/serve.url"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, args[0], base+args[1], strings.NewReader(body))
	if err != nil {
		ts.Fatalf("a2ahttp: %v", err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := http.DefaultClient
	if ca != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ts.ReadFile(ca))) {
			ts.Fatalf("a2ahttp: no certificate in %s", ca)
		}
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	res, err := hc.Do(req)
	if err != nil {
		ts.Fatalf("a2ahttp %s: %v", args[1], err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.Fatalf("a2ahttp %s: %v", args[1], err)
	}
	fmt.Fprintf(ts.Stdout(), "status %d\n%s\n", res.StatusCode, b)
}
