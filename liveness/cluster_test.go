package liveness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/liveness"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// childNodeEnv names the file of the node a child test process runs (TestChildNode).
const childNodeEnv = "COTAL_LIVENESS_NODE"

// nodeConfig is what a child process needs to run one node of the test's cluster.
type nodeConfig struct {
	Dir, Operator, System, Secret string
	Accounts                      map[string]string
	Port                          int
	Routes                        []string
}

// TestChildNode is not a test: it is the body of the child process startChildNode runs,
// one broker node in its own process, so the test can kill it as a crash kills a node.
func TestChildNode(t *testing.T) {
	path := os.Getenv(childNodeEnv)
	if path == "" {
		t.Skip("the body of a child process (startChildNode)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c nodeConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	s := &broker.Server{Dir: c.Dir, Port: -1, OperatorJWT: c.Operator, SystemAccount: c.System, Accounts: c.Accounts,
		Cluster: &broker.Cluster{Name: "test", Port: c.Port, Routes: c.Routes, Secret: c.Secret}}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("url %s\n", s.ClientURL())
	<-term // SIGTERM stops the node cleanly; SIGKILL is a crash
	_ = s.Close()
}

// startChildNode runs one node of the cluster in a child process and returns its client
// URL and the process.
func startChildNode(t *testing.T, c nodeConfig) (string, *os.Process) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildNode$", "-test.v")
	cmd.Env = append(os.Environ(), childNodeEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "url "); ok {
				urls <- u
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatal("the child node ended before it served")
		}
		return u, cmd.Process
	case <-time.After(60 * time.Second):
		t.Fatal("the child node did not start")
	}
	return "", nil
}

// TestNodeLossMarksOnlyItsPeers: a three-node cluster, nodes A and B in the test's
// process, node C in a child process. The watcher is on A, with the daemon's
// least-privilege system credential. A cut on B and on C is heard (events from any node).
// Then C goes away: its peers are marked offline; the peers on A and B, and a peer with a
// connection on B besides the one on C, are not.
//
//   - crash: C is SIGKILLed and sends nothing; the watcher's route check finds it gone.
//   - shutdown: C stops cleanly; its SHUTDOWN event is enough (the route check is off).
func TestNodeLossMarksOnlyItsPeers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sig       os.Signal
		nodeCheck time.Duration
	}{
		{"crash", syscall.SIGKILL, 100 * time.Millisecond},
		{"shutdown", syscall.SIGTERM, -1},
	} {
		t.Run(tc.name, func(t *testing.T) { nodeLoss(t, tc.sig, tc.nodeCheck) })
	}
}

func nodeLoss(t *testing.T, sig os.Signal, nodeCheck time.Duration) {
	chain := meshtest.Chain(t, space)
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	routes, ports, err := brokertest.FreeRoutes(3)
	if err != nil {
		t.Fatal(err)
	}
	var ab []*broker.Server
	for i := range 2 {
		s := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t),
			OperatorJWT: chain.OperatorJWT(), SystemAccount: chain.SystemAccount(), Accounts: accounts,
			Cluster: &broker.Cluster{Name: "test", Port: ports[i], Routes: routes, Secret: chain.RouteSecret()}}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ab = append(ab, s)
	}
	cURL, cProc := startChildNode(t, nodeConfig{Dir: t.TempDir(), Operator: chain.OperatorJWT(), System: chain.SystemAccount(),
		Secret: chain.RouteSecret(), Accounts: accounts, Port: ports[2], Routes: routes})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second) // a hang guard
	defer cancel()
	for _, s := range ab {
		if err := s.WaitJetStream(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	a, b := ab[0], ab[1]

	acct, err := chain.Space(space)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(u trust.UserSpec) []byte {
		creds, err := acct.Mint(u)
		if err != nil {
			t.Fatal(err)
		}
		return creds
	}
	js, err := jetstream.New(meshtest.ConnectTo(t, a.ClientURL(), mint(meshtest.ProvisionerSpec("prov"))))
	if err != nil {
		t.Fatal(err)
	}
	meshtest.ProvisionCluster(t, js, space, provision.Options{Replicas: 3, Peers: 3})
	kv, err := js.KeyValue(ctx, protocol.BucketPresence(space))
	if err != nil {
		t.Fatal(err)
	}
	// The presence bucket is led from A: a write after C's loss then never waits for the
	// bucket's election (which takes seconds and is JetStream's, not the watcher's).
	leadOn(t, js.Conn(), kv, a.Name())
	f := &fixture{t: t, url: a.ClientURL(), mint: mint, js: js, kv: kv, marked: make(chan protocol.Principal, 1024)}
	watch, err := chain.WatchCreds(space)
	if err != nil {
		t.Fatal(err)
	}
	f.watchOn(meshtest.ConnectTo(t, a.ClientURL(), watch), acct.PublicKey(), func(w *liveness.Watcher) {
		w.NodeCheck = nodeCheck
		w.OpTimeout = 20 * time.Second // a write may wait for a bucket leader that was on C
	})

	// C's peers go down with it: no reconnect elsewhere. The peers beat well within the
	// presence TTL: the test outlives it.
	onC, beat := nats.NoReconnect(), time.Second
	f.join(a.ClientURL(), f.agentCreds("a1", protocol.NewLifecycleUID()), beat)
	f.join(b.ClientURL(), f.agentCreds("b1", protocol.NewLifecycleUID()), beat)
	f.join(cURL, f.agentCreds("c1", protocol.NewLifecycleUID()), beat, onC)
	f.join(cURL, f.agentCreds("c2", protocol.NewLifecycleUID()), beat, onC)
	both := f.agentCreds("bc", protocol.NewLifecycleUID())
	f.join(b.ClientURL(), both, beat)
	meshtest.ConnectTo(t, cURL, both, onC)

	// Events from every node are heard, the watcher's and the others.
	// Several cuts: on a cluster a replica's copy of the bucket may lag (the watcher reads
	// from the leader); a lagging read left one cut in twenty unmarked.
	var cuts []struct{ name, url string }
	for i := range 6 {
		cuts = append(cuts, struct{ name, url string }{fmt.Sprintf("cut%d", i), []string{b.ClientURL(), cURL}[i%2]})
	}
	for _, at := range cuts {
		px := newProxy(t, at.url)
		f.join(px.url(), f.agentCreds(at.name, protocol.NewLifecycleUID()), beat, onC)
		px.down()
		select {
		case p := <-f.marked:
			if p.Actor != at.name {
				t.Fatalf("%s marked offline, want %s", p, at.name)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s, cut, was not marked offline: its server's event was not heard", at.name)
		}
	}

	// The sentinel joins while C is up (the streams may move their leaders after).
	spx := newProxy(t, a.ClientURL())
	f.join(spx.url(), f.agentCreds("sentinel", protocol.NewLifecycleUID()), beat, onC)

	t0 := time.Now()
	if err := cProc.Signal(sig); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"c1": true, "c2": true}
	for len(want) > 0 {
		select {
		case p := <-f.marked:
			if !want[p.Actor] {
				t.Fatalf("%s marked offline when node C went away; only c1 and c2 should be", p)
			}
			delete(want, p.Actor)
		case <-time.After(30 * time.Second): // a hang guard: only the watcher's Marked sends on f.marked, never a TTL
			t.Fatalf("%v not marked offline after node C went away", want)
		}
	}
	t.Logf("node C's peers offline %s after %s", time.Since(t0), sig)
	// Every event before the sentinel's cut has been applied once it is marked.
	spx.down()
	select {
	case p := <-f.marked:
		if p.Actor != "sentinel" {
			t.Fatalf("%s marked offline after node C went away; only c1 and c2 should be", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sentinel, cut, was not marked offline")
	}
	for actor, want := range map[string]protocol.Status{"a1": protocol.StatusIdle, "b1": protocol.StatusIdle, "bc": protocol.StatusIdle,
		"c1": protocol.StatusOffline, "c2": protocol.StatusOffline} {
		if st, _ := f.status(actor); st != want {
			t.Errorf("%s is %q, want %q", actor, st, want)
		}
	}
}

// leadOn moves the leader of kv's stream to the server named name.
func leadOn(t *testing.T, nc *nats.Conn, kv jetstream.KeyValue, name string) {
	t.Helper()
	stream := "KV_" + kv.Bucket()
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": name}})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, stream+" led by "+name, 60*time.Second, func() bool {
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		if err != nil || info.Cluster == nil {
			return false
		}
		if info.Cluster.Leader == name {
			return true
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, body, 5*time.Second)
		return false
	})
}
