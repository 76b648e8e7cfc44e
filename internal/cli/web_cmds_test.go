package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// dashboardURL is the address the detached dashboard of the script's project printed in
// its log (.cotal/web.log), the newest one.
func dashboardURL(ts *testscript.TestScript) string {
	all := regexp.MustCompile(`✓ cotal web: (http://127\.0\.0\.1:[0-9]+/)`).FindAllStringSubmatch(ts.ReadFile(".cotal/web.log"), -1)
	if len(all) == 0 {
		ts.Fatalf("no dashboard URL in .cotal/web.log")
	}
	return all[len(all)-1][1]
}

// cmdWebGet sends one request to the project's detached dashboard and prints "status N"
// and the answer's body. -host sends another Host header (a DNS-rebound page's); -until
// asks again until the answer matches REGEX (the dashboard's view catching up).
//
//	webget [-host HOST] [-post BODY] [-until REGEX] PATH
func cmdWebGet(ts *testscript.TestScript, neg bool, args []string) {
	method, host, body, until := "GET", "", "", ""
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-host":
			host = args[1]
		case "-post":
			method, body = "POST", args[1]
		case "-until":
			until = args[1]
		default:
			ts.Fatalf("webget: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if neg || len(args) != 1 {
		ts.Fatalf("usage: webget [-host HOST] [-post BODY] [-until REGEX] PATH")
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for {
		out := webGet(ts, method, host, body, args[0])
		if until == "" || regexp.MustCompile(until).MatchString(out) || time.Now().After(deadline) {
			fmt.Fprint(ts.Stdout(), out)
			return
		}
		time.Sleep(100 * time.Millisecond) // polling an HTTP answer: no event to wait on
	}
}

func webGet(ts *testscript.TestScript, method, host, body, path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(dashboardURL(ts), "/")+path, strings.NewReader(body))
	if err != nil {
		ts.Fatalf("webget: %v", err)
	}
	if host != "" {
		req.Host = host
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.Fatalf("webget %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.Fatalf("webget %s: %v", path, err)
	}
	return fmt.Sprintf("status %d\n%s\n", res.StatusCode, b)
}

// cmdCredPeer plays a peer holding a creds file (cotal mint) on the script project's mesh
// and first space: it joins, sets STATUS and ACTIVITY, and stays in presence until the
// script ends.
//
//	credpeer CREDS STATUS ACTIVITY
func cmdCredPeer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: credpeer CREDS STATUS ACTIVITY")
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
		ts.Fatalf("credpeer: %v", err)
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		ts.Fatalf("credpeer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	ep, err := client.Connect(ctx, mesh.Server, client.Config{Space: mesh.Spaces[0], Owner: c.Principal.Owner, Actor: c.Principal.Actor,
		Name: c.Principal.Actor, Role: c.Role, LifecycleUID: c.LifecycleUID}, c.Options()...)
	if err != nil {
		ts.Fatalf("credpeer connect: %v", err)
	}
	ts.Defer(func() { _ = ep.Close() })
	if err := ep.Join(ctx); err != nil {
		ts.Fatalf("credpeer join: %v", err)
	}
	if err := ep.SetActivity(ctx, args[2]); err != nil {
		ts.Fatalf("credpeer activity: %v", err)
	}
	if err := ep.SetStatus(ctx, protocol.Status(args[1])); err != nil {
		ts.Fatalf("credpeer status: %v", err)
	}
}
