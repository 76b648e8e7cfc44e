package cli_test

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/trust"
)

// scriptMesh is the URL of the mesh the script's project runs and its trust chain.
func scriptMesh(ts *testscript.TestScript) (string, *trust.Chain) {
	var mesh struct {
		Server string `json:"server"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh); err != nil {
		ts.Fatalf("mesh.json: %v", err)
	}
	chain, err := trust.Open(ts.MkAbs(".cotal/auth"))
	if err != nil {
		ts.Fatalf("trust chain: %v", err)
	}
	return mesh.Server, chain
}

// cmdKick closes, from the broker's side, every connection whose name is NAME: it asks
// the broker (as the project's system account) for its connections and kicks the ones
// named so, the way an operator would with `nats server request kick`.
//
//	kick NAME
func cmdKick(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: kick NAME")
	}
	server, chain := scriptMesh(ts)
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		ts.Fatalf("system creds: %v", err)
	}
	c, err := trust.ReadCreds(sysCreds)
	if err != nil {
		ts.Fatalf("system creds: %v", err)
	}
	nc, err := nats.Connect(server, c.Options()...)
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	msg, err := nc.Request("$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"limit": 1024}`), 5*time.Second)
	if err != nil {
		ts.Fatalf("CONNZ: %v", err)
	}
	page, err := connz.Decode(msg.Data)
	if err != nil {
		ts.Fatalf("CONNZ: %v", err)
	}
	kicked := 0
	for _, conn := range page.Conns {
		if conn.Name != args[0] {
			continue
		}
		body, _ := json.Marshal(map[string]uint64{"cid": conn.CID})
		if _, err := nc.Request("$SYS.REQ.SERVER."+page.Server+".KICK", body, 5*time.Second); err != nil {
			ts.Fatalf("kick cid %d: %v", conn.CID, err)
		}
		kicked++
	}
	if kicked == 0 {
		ts.Fatalf("no connection named %q", args[0])
	}
	ts.Logf("kicked %d connection(s) named %q", kicked, args[0])
}

// cmdSrvStats asks the NATS micro service NAME of SPACE's callout account for its stats,
// as `nats micro stats NAME` would from inside that account, and prints the answer.
//
//	srvstats SPACE NAME
func cmdSrvStats(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: srvstats SPACE NAME")
	}
	server, chain := scriptMesh(ts)
	ua, err := chain.UserAuth(args[0])
	if err != nil {
		ts.Fatalf("callout account: %v", err)
	}
	c, err := trust.ReadCreds(ua.CalloutCreds())
	if err != nil {
		ts.Fatalf("callout creds: %v", err)
	}
	nc, err := nats.Connect(server, nats.UserJWTAndSeed(c.JWT, c.Seed))
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	msg, err := nc.Request("$SRV.STATS."+args[1], nil, 5*time.Second)
	if err != nil {
		ts.Fatalf("$SRV.STATS.%s: %v", args[1], err)
	}
	ts.Stdout().Write(append(msg.Data, '\n'))
}
