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
	"github.com/cotal-ai/cotal/protocol"
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

// cmdPeer plays a peer that writes what it likes in its card and messages, which neither
// the CLI nor the Go SDK would let it write: on the script project's open mesh and first
// space it writes its own presence record raw (as ACTOR, shown as NAME, with ACTIVITY) and
// keeps it fresh until the script ends, then posts and sends DMs in order through the SDK.
// NAME, ACTIVITY and TEXT are read with Go string escapes (\n, \x1b, \u202e).
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
	space := mesh.Spaces[0]
	ep, err := client.Connect(ctx, mesh.Server, client.Config{Space: space, Actor: args[0], Name: args[0]})
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	kv, err := ep.JetStream().KeyValue(ctx, protocol.BucketPresence(space))
	if err != nil {
		ts.Fatalf("presence bucket: %v", err)
	}
	me := ep.Principal()
	rec := protocol.Presence{Card: protocol.AgentCard{ID: me.String(), Name: unquoteArg(ts, args[1]), Kind: protocol.CardAgent,
		ProtocolVersion: protocol.ProtocolVersion, Owner: me.Owner, Actor: me.Actor},
		Status: protocol.StatusIdle, Activity: unquoteArg(ts, args[2])}
	write := func(ctx context.Context) error {
		rec.TS = time.Now().UnixMilli()
		b, err := json.Marshal(rec)
		if err == nil {
			_, err = kv.Put(ctx, me.String(), b)
		}
		return err
	}
	if err := write(ctx); err != nil {
		ts.Fatalf("write presence: %v", err)
	}
	beat, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(protocol.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-beat.Done():
				return
			case <-t.C:
				_ = write(beat) // a missed beat shows the peer offline, which the script would report
			}
		}
	}()
	ts.Defer(func() { stop(); <-done; _ = ep.Close() })
	for a := args[3:]; len(a) > 0; a = a[3:] {
		m := ep.Envelope(client.Text(unquoteArg(ts, a[2])))
		m.From.Name = rec.Card.Name // the name it chose, in the message too
		var subject string
		switch a[0] {
		case "post":
			m.Channel, subject = a[1], protocol.ChatSubject(space, me, a[1])
		case "dm":
			to, err := ep.Resolve(ctx, a[1])
			if err != nil {
				ts.Fatalf("peer dm %s: %v", a[1], err)
			}
			m.To, subject = to.Principal.String(), protocol.InstSubject(space, to.Principal, me)
		default:
			ts.Fatalf("peer: unknown action %q: want post or dm", a[0])
		}
		b, err := protocol.EncodeMessage(m)
		if err == nil {
			_, err = ep.JetStream().Publish(ctx, subject, b)
		}
		if err != nil {
			ts.Fatalf("peer %s %s: %v", a[0], a[1], err)
		}
		fmt.Fprintf(ts.Stdout(), "%s %s: sent\n", a[0], a[1])
	}
}
