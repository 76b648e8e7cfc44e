package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// cmdStreams lists the streams (and the KV buckets' streams) of a space on the script
// project's mesh, one "NAME replicas=N" line each, sorted, as the space's provisioner:
//
//	streams SPACE
func cmdStreams(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: streams SPACE")
	}
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(args[0])
	if err != nil {
		ts.Fatalf("space account: %v", err)
	}
	creds, err := acct.Mint(trust.UserSpec{Name: "script", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "script"}, ExpiresIn: time.Hour})
	if err != nil {
		ts.Fatalf("mint: %v", err)
	}
	c, err := trust.ReadCreds(creds)
	if err != nil {
		ts.Fatalf("creds: %v", err)
	}
	var mesh struct {
		TLSCA string `json:"tlsCA"`
	}
	_ = json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh) // scriptMesh read it
	nc, err := nats.Connect(server, append(c.Options(), client.TLSOptions(mesh.TLSCA)...)...)
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		ts.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var lines []string
	names := js.ListStreams(ctx)
	for info := range names.Info() {
		lines = append(lines, fmt.Sprintf("%s replicas=%d", info.Config.Name, info.Config.Replicas))
	}
	if err := names.Err(); err != nil {
		ts.Fatalf("list streams: %v", err)
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(ts.Stdout(), l)
	}
}
