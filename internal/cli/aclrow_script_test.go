package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdACLRow prints the live read ACL rows of local.ACTOR in cotal_acl_SPACE on the
// script's mesh, read as the space's provisioner, one line a row:
//
//	<uid> fields=<the row's field names> allowSubscribe=<list> issuedAllowSubscribe=<list> revision=<n>
//
// where <uid> is "current" for the lifecycle uid the project's trust chain holds for
// ACTOR and the key's uid otherwise. With !, it fails if ACTOR has any row.
//
//	aclrow SPACE ACTOR
func cmdACLRow(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: aclrow SPACE ACTOR")
	}
	space, actor := args[0], args[1]
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(space)
	if err != nil {
		ts.Fatalf("account: %v", err)
	}
	p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
	b, err := acct.Mint(trust.UserSpec{Name: "aclrow", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "aclrow"}, ExpiresIn: time.Hour})
	if err != nil {
		ts.Fatalf("provisioner creds: %v", err)
	}
	c, err := trust.ReadCreds(b)
	if err != nil {
		ts.Fatalf("provisioner creds: %v", err)
	}
	nc, err := nats.Connect(server, c.Options()...)
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		ts.Fatalf("jetstream: %v", err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketACL(space))
	if err != nil {
		ts.Fatalf("ACL bucket: %v", err)
	}
	uid, err := chain.Identity(space, actor)
	if err != nil {
		ts.Fatalf("identity: %v", err)
	}
	keys, err := kv.ListKeysFiltered(ctx, p.String()+".*")
	if err != nil {
		ts.Fatalf("ACL keys: %v", err)
	}
	var lines []string
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			ts.Fatalf("ACL row %s: %v", k, err)
		}
		var fields map[string]json.RawMessage
		var row struct {
			AllowSubscribe       []string `json:"allowSubscribe"`
			IssuedAllowSubscribe []string `json:"issuedAllowSubscribe"`
			Revision             uint64   `json:"revision"`
		}
		if err := json.Unmarshal(e.Value(), &fields); err != nil {
			ts.Fatalf("ACL row %s: %v", k, err)
		}
		if err := json.Unmarshal(e.Value(), &row); err != nil {
			ts.Fatalf("ACL row %s: %v", k, err)
		}
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		slices.Sort(names)
		who := strings.TrimPrefix(k, p.String()+".")
		if who == uid {
			who = "current"
		}
		lines = append(lines, fmt.Sprintf("%s fields=%s allowSubscribe=%s issuedAllowSubscribe=%s revision=%d",
			who, strings.Join(names, ","), strings.Join(row.AllowSubscribe, ","), strings.Join(row.IssuedAllowSubscribe, ","), row.Revision))
	}
	if err := ctx.Err(); err != nil {
		ts.Fatalf("ACL keys: %v", err)
	}
	for _, l := range lines {
		fmt.Fprintln(ts.Stdout(), l)
	}
	switch {
	case neg && len(lines) > 0:
		ts.Fatalf("%s has %d read ACL row(s) in space %s", p, len(lines), space)
	case !neg && len(lines) == 0:
		ts.Fatalf("%s has no read ACL row in space %s", p, space)
	}
}
