package meshtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// clusterWait bounds the wait for a cluster's routes and system subscriptions.
const clusterWait = 20 * time.Second

// Cluster starts n operator-mode nats-servers on loopback (random client and route ports,
// no JetStream), routed to each other, trusting chain and serving every account on disk;
// they stop when the test ends. It returns once every server routes to all the others and
// answers system requests asked through the first, so a $SYS PING reaches them all.
func Cluster(t testing.TB, chain *trust.Chain, n int) []*server.Server {
	t.Helper()
	op, err := jwt.DecodeOperatorClaims(chain.OperatorJWT())
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := chain.AccountJWTs()
	if err != nil {
		t.Fatal(err)
	}
	var servers []*server.Server
	for i := range n {
		res := &server.MemAccResolver{}
		for pub, token := range accounts {
			if err := res.Store(pub, token); err != nil {
				t.Fatal(err)
			}
		}
		opts := &server.Options{
			Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxControlLine: broker.MaxControlLine,
			Cluster:          server.ClusterOpts{Name: "meshtest", Host: "127.0.0.1", Port: -1},
			TrustedOperators: []*jwt.OperatorClaims{op},
			SystemAccount:    chain.SystemAccount(),
			AccountResolver:  res,
		}
		if i > 0 {
			opts.Routes = server.RoutesFromStr("nats://" + servers[0].ClusterAddr().String())
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(clusterWait) {
			t.Fatalf("cluster server %d not ready", i)
		}
		servers = append(servers, s)
	}
	sys := SystemConn(t, chain, servers[0].ClientURL())
	defer sys.Close()
	for _, s := range servers {
		Until(t, "server "+s.ID()+" routed and answering system requests", clusterWait, func() bool {
			if s.NumRoutes() < n-1 {
				return false
			}
			_, err := sys.Request("$SYS.REQ.SERVER."+s.ID()+".IDZ", nil, time.Second)
			return err == nil
		})
	}
	return servers
}

// SystemConn connects to url as a user of chain's system account; the connection is closed
// when the test ends.
func SystemConn(t testing.TB, chain *trust.Chain, url string) *nats.Conn {
	t.Helper()
	creds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ConnectTo(t, url, creds)
}

// ConnectTo connects to url as the holder of creds, with opts after the creds' options;
// the connection is closed when the test ends.
func ConnectTo(t testing.TB, url string, creds []byte, opts ...nats.Option) *nats.Conn {
	t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, append(c.Options(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// UserKey is the public key of the user holding creds: what the broker reports as the
// authorized user of a connection made with a plain user JWT.
func UserKey(t testing.TB, creds []byte) string {
	t.Helper()
	c, err := trust.ReadCreds(creds)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(c.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// ProvisionCluster provisions space through js on a cluster that has just started. A new
// cluster may not have enabled JetStream for the space's account on every node yet, which
// a node answers with a 503 (JetStream not enabled for account): the space is provisioned
// again then, up to a minute (a hang guard). Any other error fails the test.
func ProvisionCluster(t testing.TB, js jetstream.JetStream, space string, opts provision.Options) {
	t.Helper()
	var err error
	Until(t, "space "+space+" provisioned on the new cluster", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = provision.Space(ctx, js, space, opts)
		var api *jetstream.APIError
		if err != nil && !(errors.As(err, &api) && api.Code == 503) {
			t.Fatalf("provision space %s: %v", space, err)
		}
		return err == nil
	})
}
