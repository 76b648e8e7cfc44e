package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
)

// TestClusterNodeLoss: on a three-node cluster with R3 streams, alice (first on node A) DMs
// bob (first on node B) while one node stops and comes back, and then the node that leads
// the DM stream stops: every DM the broker acknowledged reaches bob exactly once, and both
// keep working through their reconnects.
func TestClusterNodeLoss(t *testing.T) {
	nodes := brokertest.StartCluster(t, 3, nil)
	urls := func(first int) string {
		var us []string
		for i := range nodes {
			us = append(us, nodes[(first+i)%len(nodes)].ClientURL())
		}
		return strings.Join(us, ",")
	}
	nc, err := nats.Connect(urls(0))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.ProvisionCluster(t, js, space, provision.Options{DefaultDeliveryClass: "live", Replicas: 3, Peers: 3})
	nc.Close()
	// A hang guard, taken after provisioning (which may wait out a new cluster's 503s):
	// two node losses, a restart and up to two leader elections fit in it on a loaded
	// machine.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	join := func(name string, first int) *client.Endpoint {
		ep, err := client.Connect(ctx, urls(first), client.Config{Space: space, Name: name,
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))},
			nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.DontRandomize())
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		if err := ep.Join(ctx); err != nil {
			t.Fatalf("join %s: %v", name, err)
		}
		return ep
	}
	alice, bob := join("alice", 0), join("bob", 1)

	sent := 0
	send := func(n int) { // each DM retried with its id until the broker acknowledges it
		for range n {
			d := client.Text(fmt.Sprintf("dm %02d", sent))
			d.ID = fmt.Sprintf("dm-%02d", sent)
			for {
				_, err := alice.DM(ctx, bob.Principal(), d)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("dm %d never acknowledged: %v", sent, err)
				}
				time.Sleep(100 * time.Millisecond) // an election may be on: no busy loop
			}
			sent++
		}
	}
	send(10)
	third := nodes[2]
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	send(10)
	nodes[2] = brokertest.Restart(t, third, nodes[0], nodes[1])
	if err := nodes[2].WaitJetStream(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The stream leader's node: every replica must be current first, or stopping it could
	// leave the two others without the last writes' quorum.
	var leader *broker.Server
	watch := js2(t, urls(0))
	for leader == nil {
		st, err := watch.Stream(ctx, "DM_"+space)
		if err == nil {
			info := st.CachedInfo()
			current := info.Cluster != nil && len(info.Cluster.Replicas) == 2
			for _, r := range info.Cluster.Replicas {
				current = current && r.Current && !r.Offline
			}
			for _, n := range nodes {
				if current && n.Name() == info.Cluster.Leader {
					leader = n
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("DM stream never current on three replicas: %v", err)
		}
		if leader == nil {
			time.Sleep(100 * time.Millisecond) // re-check interval
		}
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	send(10)

	got := map[string]int{}
	for len(got) < sent {
		select {
		case in := <-bob.Messages():
			if err := in.Ack(); err != nil {
				t.Logf("ack %q: %v (redelivered later)", in.Text(), err)
				continue
			}
			got[in.Text()]++
		case <-ctx.Done():
			t.Fatalf("bob got %d of %d DMs: %v", len(got), sent, got)
		}
	}
	for text, n := range got {
		if n != 1 {
			t.Errorf("%q arrived %d times", text, n)
		}
	}
}

// js2 is a JetStream context on a fresh connection to urls, closed at cleanup.
func js2(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
