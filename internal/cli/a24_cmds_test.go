package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// nextLine is the command of a "next: run `...`" line, as the CLI prints it.
var nextLine = regexp.MustCompile("(?m)^next: run `([^`]+)`$")

// cmdRunNext runs, exactly as printed, the last "next: run `...`" line of the previous
// command's stderr (stdout with -stdout), with sh in the script's folder and environment,
// so a script checks that a hint is safe to run and fixes what it follows. Its stdout
// and stderr become the script's, for the checks that follow; with !, it must fail.
//
//	runnext [-stdout]
func cmdRunNext(ts *testscript.TestScript, neg bool, args []string) {
	from := "stderr"
	if len(args) == 1 && args[0] == "-stdout" {
		from, args = "stdout", nil
	}
	if len(args) != 0 {
		ts.Fatalf("usage: runnext [-stdout]")
	}
	m := nextLine.FindAllStringSubmatch(ts.ReadFile(from), -1)
	if len(m) == 0 {
		ts.Fatalf("no next line in %s", from)
	}
	line := m[len(m)-1][1]
	if strings.ContainsAny(line, "<>") {
		ts.Fatalf("next line holds a placeholder: %s", line)
	}
	ts.Logf("running the next line as printed: %s", line)
	err := ts.Exec("sh", "-c", line)
	switch {
	case err != nil && !neg:
		ts.Fatalf("next line %q: %v", line, err)
	case err == nil && neg:
		ts.Fatalf("next line %q succeeded unexpectedly", line)
	}
}

// cmdKVDel deletes a KV bucket of a space on the script project's mesh, as the space's
// provisioner: a space made by an older cotal, before that bucket existed.
//
//	kvdel SPACE BUCKET
func cmdKVDel(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: kvdel SPACE BUCKET")
	}
	server, chain := scriptMesh(ts)
	acct, err := chain.Space(args[0])
	ts.Check(err)
	creds, err := acct.Mint(trust.UserSpec{Name: "script", Profile: trust.ProfileProvisioner,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "script"}, ExpiresIn: time.Hour})
	ts.Check(err)
	c, err := trust.ReadCreds(creds)
	ts.Check(err)
	var mesh struct {
		TLSCA string `json:"tlsCA"`
	}
	_ = json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh)
	nc, err := nats.Connect(server, append(c.Options(), client.TLSOptions(mesh.TLSCA)...)...)
	ts.Check(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts.Check(js.DeleteKeyValue(ctx, args[1]))
}
