package provision_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

func TestSpaceRefusesReplicasOnOneServer(t *testing.T) {
	js := meshtest.JetStream(t)
	_, err := provision.Space(t.Context(), js, "prod", provision.Options{Replicas: 3})
	if !errors.Is(err, provision.ErrNotClustered) || !strings.Contains(err.Error(), "replicas 3") {
		t.Fatalf("err %v, want ErrNotClustered naming replicas 3", err)
	}
	if got := streamNames(t, js); len(got) != 0 {
		t.Fatalf("a refused provision created %v", got)
	}
	for _, n := range []int{-1, 6} {
		if _, err := provision.Space(t.Context(), js, "prod", provision.Options{Replicas: n}); err == nil || !strings.Contains(err.Error(), "want 1 to 5") {
			t.Errorf("replicas %d: err %v", n, err)
		}
	}
	if _, err := provision.Space(t.Context(), js, "prod", provision.Options{Replicas: 1}); err != nil {
		t.Fatalf("replicas 1 on one server: %v", err)
	}
	if c := streamConfig(t, js, "DM_prod"); c.Replicas != 1 {
		t.Fatalf("DM_prod replicas %d", c.Replicas)
	}
}

func TestDefaultReplicas(t *testing.T) {
	for _, c := range []struct {
		clustered bool
		peers     int
		want      int
	}{{false, 0, 1}, {false, 1, 1}, {true, 0, 1}, {true, 2, 1}, {true, 3, 3}, {true, 5, 3}} {
		if got := provision.DefaultReplicas(c.clustered, c.peers); got != c.want {
			t.Errorf("DefaultReplicas(%v, %d) = %d, want %d", c.clustered, c.peers, got, c.want)
		}
	}
}

func TestJetStreamPeersOnOneServer(t *testing.T) {
	m := meshtest.Start(t, "prod")
	sys := meshtest.SystemConn(t, m.Chain, m.URL)
	n, err := provision.JetStreamPeers(t.Context(), sys)
	if err != nil || n != 1 {
		t.Fatalf("peers %d, err %v; want 1", n, err)
	}
}

// TestSpaceScalesUpOnCluster provisions a space with one replica on a three-server
// JetStream cluster, stores a DM, and provisions it again with three: every stream and
// bucket is scaled in place, and the DM is still there.
func TestSpaceScalesUpOnCluster(t *testing.T) {
	chain := meshtest.Chain(t, "prod")
	urls := jetStreamCluster(t, chain, 3)
	sys := meshtest.SystemConn(t, chain, urls[0])
	// A new cluster learns its peers as their routes form: wait until all three are
	// known (a hang guard, no measure).
	var peers int
	meshtest.Until(t, "the cluster's three JetStream peers", time.Minute, func() bool {
		n, err := provision.JetStreamPeers(t.Context(), sys)
		peers = n
		return err == nil && n == 3
	})
	if got := provision.DefaultReplicas(sys.ConnectedClusterName() != "", peers); got != 3 {
		t.Fatalf("default replicas %d, want 3", got)
	}
	acct, err := chain.Space("prod")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := acct.Mint(meshtest.ProvisionerSpec("op"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(meshtest.ConnectTo(t, urls[1], creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// A server enables JetStream for an account once it has the account's JWT and the
	// meta leader, which may come just after the cluster says it is ready.
	meshtest.Until(t, "JetStream enabled for the space's account", 30*time.Second, func() bool {
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	if _, err := provision.Space(ctx, js, "prod", provision.Options{Replicas: 1, Peers: peers}); err != nil {
		t.Fatalf("provision R1: %v", err)
	}
	bob := protocol.Principal{Owner: "local", Actor: "bob"}
	if _, err := js.Publish(ctx, protocol.InstSubject("prod", bob, protocol.Principal{Owner: "local", Actor: "a"}), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(ctx, js, "prod", provision.Options{Replicas: 5, Peers: peers}); !errors.Is(err, provision.ErrNotEnoughPeers) {
		t.Fatalf("replicas 5 on 3 peers: %v", err)
	}
	rep, err := provision.Space(ctx, js, "prod", provision.Options{Replicas: 3, Peers: peers})
	if err != nil {
		t.Fatalf("scale to R3: %v", err)
	}
	if len(rep.Updated) != broker.SpaceStreams || len(rep.Created) != 0 {
		t.Fatalf("report %+v, want the %d streams and buckets updated", rep, broker.SpaceStreams)
	}
	for _, n := range []string{"CHAT_prod", "DM_prod", "TASK_prod", "INBOX_prod", "DLV_prod", "KV_cotal_presence_prod", "KV_cotal_channels_prod",
		"KV_cotal_delivery_prod", "KV_cotal_manager_prod", "KV_cotal_members_prod", "KV_cotal_acl_prod", "KV_cotal_auth_prod", "KV_cotal_claims_prod", "EPJ_prod", "EPF_prod", "EPC_prod", "KV_cotal_tasks_prod",
		"WFJ_prod", "KV_cotal_records_prod", "KV_cotal_admission_prod", "KV_cotal_a2a_prod", "KV_cotal_a2apeers_prod", "EPT_REQ_prod", "EPT_prod"} {
		if c := streamConfig(t, js, n); c.Replicas != 3 {
			t.Errorf("%s replicas %d, want 3", n, c.Replicas)
		}
	}
	st, err := js.Stream(ctx, "DM_prod")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("DM_prod after scaling: %v, err %v", st, err)
	}
	// Asked for one replica again, the space keeps three and says so.
	rep, err = provision.Space(ctx, js, "prod", provision.Options{Replicas: 1, Peers: peers})
	if err != nil || len(rep.Existing) != broker.SpaceStreams+1 || len(rep.Notes) != broker.SpaceStreams || !strings.Contains(rep.Notes[0], "replicas 3, want 1") {
		t.Fatalf("R1 over R3: %+v, err %v", rep, err)
	}
	if c := streamConfig(t, js, "CHAT_prod"); c.Replicas != 3 {
		t.Fatalf("CHAT_prod lowered to %d replicas", c.Replicas)
	}
}

// jetStreamCluster starts n operator-mode nats-servers with JetStream on loopback, routed
// to each other and trusting chain, and returns their client URLs once the JetStream meta
// group has a leader. They stop when the test ends.
func jetStreamCluster(t *testing.T, chain *trust.Chain, n int) []string {
	t.Helper()
	op, err := jwt.DecodeOperatorClaims(chain.OperatorJWT())
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	// JetStream in a cluster wants its routes configured from the start, so every
	// server is handed every route port, each a free port found just before.
	var routes []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, "nats://"+l.Addr().String())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var servers []*server.Server
	var urls []string
	for i := range n {
		res := &server.MemAccResolver{}
		for pub, token := range accounts {
			if err := res.Store(pub, token); err != nil {
				t.Fatal(err)
			}
		}
		port, err := strconv.Atoi(routes[i][strings.LastIndex(routes[i], ":")+1:])
		if err != nil {
			t.Fatal(err)
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			MaxControlLine: broker.MaxControlLine, JetStream: true, StoreDir: t.TempDir(),
			Cluster:          server.ClusterOpts{Name: "rtest", Host: "127.0.0.1", Port: port},
			Routes:           server.RoutesFromStr(strings.Join(routes, ",")),
			TrustedOperators: []*jwt.OperatorClaims{op},
			SystemAccount:    chain.SystemAccount(),
			AccountResolver:  res,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		servers = append(servers, s)
	}
	for _, s := range servers { // a JetStream cluster server is ready once its peers are
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("cluster server %s not ready", s.Name())
		}
		urls = append(urls, s.ClientURL())
	}
	meshtest.Until(t, fmt.Sprintf("a JetStream meta leader with %d peers", n), 30*time.Second, func() bool {
		for _, s := range servers {
			if len(s.JetStreamClusterPeers()) == n { // the leader alone answers
				return true
			}
		}
		return false
	})
	return urls
}
