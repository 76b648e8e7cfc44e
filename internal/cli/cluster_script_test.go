package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
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

// cmdWhoHolds finds, with `cotal status --json` run in each project folder DIR, the one
// whose own daemon holds the lease NAME ("delivery", or "auth" for the plane claim), and
// sets $VAR to it and $VAR_1, $VAR_2, ... to the other DIRs in order. With -wait, it asks
// again until one does (SECONDS is a hang guard; a folder whose mesh is down answers
// nothing and is skipped); without, exactly one folder must hold it now. With -any, it
// waits only until some daemon holds the lease, on any node, as a DIR's status sees it,
// and sets $VAR to that DIR:
//
//	whoholds [-wait SECONDS] [-any] VAR NAME DIR...
func cmdWhoHolds(ts *testscript.TestScript, neg bool, args []string) {
	guard := time.Duration(0)
	if len(args) > 2 && args[0] == "-wait" {
		secs, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("whoholds: -wait %s: %v", args[1], err)
		}
		guard, args = time.Duration(secs)*time.Second, args[2:]
	}
	anyNode := len(args) > 0 && args[0] == "-any"
	if anyNode {
		args = args[1:]
	}
	if neg || len(args) < 3 {
		ts.Fatalf("usage: whoholds [-wait SECONDS] [-any] VAR NAME DIR...")
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	v, name, dirs := args[0], args[1], args[2:]
	deadline := time.Now().Add(guard)
	for {
		var holders []string
		var seen strings.Builder
		for _, dir := range dirs {
			cmd := exec.Command(exe, "status", "--json")
			cmd.Dir = ts.MkAbs(dir)
			cmd.Env = os.Environ()
			for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR"} {
				cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
			}
			if a := ts.Getenv("COTAL_ACTOR"); a != "" { // the person status signs in as, on a user-auth space
				cmd.Env = append(cmd.Env, "COTAL_ACTOR="+a)
			}
			out, err := cmd.Output()
			if err != nil {
				fmt.Fprintf(&seen, "%s: %v\n", dir, err)
				continue
			}
			var rep struct {
				Leases []struct {
					Name  string `json:"name"`
					State string `json:"state"`
					Here  bool   `json:"here"`
					Error string `json:"error"`
				} `json:"leases"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				ts.Fatalf("whoholds: status in %s: %v\n%s", dir, err, out)
			}
			for _, l := range rep.Leases {
				if l.Name == name {
					fmt.Fprintf(&seen, "%s: %s here=%v %s\n", dir, l.State, l.Here, l.Error)
					if l.Here {
						holders = append(holders, dir)
					}
					if anyNode && l.State == "held" {
						ts.Logf("whoholds -any %s: held (seen from %s, here=%v)", name, dir, l.Here)
						ts.Setenv(v, dir)
						return
					}
				}
			}
		}
		if len(holders) == 1 {
			ts.Logf("whoholds %s: %s", name, holders[0])
			ts.Setenv(v, holders[0])
			i := 0
			for _, dir := range dirs {
				if dir != holders[0] {
					i++
					ts.Setenv(fmt.Sprintf("%s_%d", v, i), dir)
				}
			}
			return
		}
		if len(holders) > 1 || !time.Now().Before(deadline) {
			ts.Fatalf("whoholds %s: held here by %d folders, want 1:\n%s", name, len(holders), seen.String())
		}
		time.Sleep(500 * time.Millisecond) // re-check interval
	}
}
