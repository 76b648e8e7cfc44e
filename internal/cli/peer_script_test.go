package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
)

// unquoteArg reads a script argument with Go string escapes (\n, \x1b, \u202e).
func unquoteArg(ts *testscript.TestScript, s string) string {
	u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	if err != nil {
		ts.Fatalf("unquote %s: %v", s, err)
	}
	return u
}

// cmdSetq sets $VAR to TEXT read with Go string escapes, so a script can hand a
// command control characters:
//
//	setq VAR TEXT
func cmdSetq(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setq VAR TEXT")
	}
	ts.Setenv(args[0], unquoteArg(ts, args[1]))
}

// cmdPeer plays a peer that writes what it likes in its card and messages, which the CLI
// would never let a person type: through the Go SDK, on the script project's open mesh and
// first space, it joins as ACTOR shown as NAME, sets its activity, then posts and sends
// DMs in order, and stays in presence until the script ends. NAME, ACTIVITY and TEXT are
// read with Go string escapes (\n, \x1b, \u202e).
//
//	peer ACTOR NAME ACTIVITY [post CHANNEL TEXT | dm TO TEXT]...
func cmdPeer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || (len(args)-3)%3 != 0 {
		ts.Fatalf("usage: peer ACTOR NAME ACTIVITY [post CHANNEL TEXT | dm TO TEXT]...")
	}
	var mesh struct {
		Server string   `json:"server"`
		Spaces []string `json:"spaces"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh); err != nil || len(mesh.Spaces) == 0 {
		ts.Fatalf("mesh.json: %v (spaces %v)", err, mesh.Spaces)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	ep, err := client.Connect(ctx, mesh.Server, client.Config{Space: mesh.Spaces[0], Actor: args[0], Name: unquoteArg(ts, args[1])})
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	ts.Defer(func() { _ = ep.Close() })
	if err := ep.Join(ctx); err != nil {
		ts.Fatalf("join: %v", err)
	}
	if err := ep.SetActivity(ctx, unquoteArg(ts, args[2])); err != nil {
		ts.Fatalf("activity: %v", err)
	}
	for a := args[3:]; len(a) > 0; a = a[3:] {
		text := client.Text(unquoteArg(ts, a[2]))
		switch a[0] {
		case "post":
			_, err = ep.Post(ctx, a[1], text)
		case "dm":
			var to client.Target
			if to, err = ep.Resolve(ctx, a[1]); err == nil {
				_, err = ep.DM(ctx, to.Principal, text)
			}
		default:
			ts.Fatalf("peer: unknown action %q: want post or dm", a[0])
		}
		if err != nil {
			ts.Fatalf("peer %s %s: %v", a[0], a[1], err)
		}
		fmt.Fprintf(ts.Stdout(), "%s %s: sent\n", a[0], a[1])
	}
}
