package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/tlstest"
)

// TestClusterTLSRoutes: with ClusterTLS, three nodes form their cluster over TLS routes
// (each route port asks for TLS in its INFO) and replicate a stream across them.
func TestClusterTLSRoutes(t *testing.T) {
	certs, err := tlstest.Write(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nodes := brokertest.StartCluster(t, 3, func(_ int, s *broker.Server) {
		s.TLSCert, s.TLSKey, s.TLSCA, s.ClusterTLS = certs.Cert, certs.Key, certs.CA, true
		s.Cluster.Secret = "s3cret"
	})
	for i, n := range nodes {
		if err := routeHandshake(n.ClusterAddr(), certs); err != nil {
			t.Fatalf("node %d: route port %s: %v: want routes over TLS", i, n.ClusterAddr(), err)
		}
	}
	nc, err := nats.Connect(nodes[0].ClientURL(), nats.RootCAs(certs.CA))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second) // hang guard
	defer cancel()
	// A new cluster may answer its first request 503 until every peer has registered.
	var st jetstream.Stream
	untilAcked(ctx, t, "create stream TLS3", func(ctx context.Context) (err error) {
		st, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "TLS3", Subjects: []string{"tls3.>"}, Replicas: 3})
		return err
	})
	if _, err := js.Publish(ctx, "tls3.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v: want a leader and two replicas", info.Cluster)
	}
}

// TestClusterTLSNeedsCA: ClusterTLS without the CA that checks the peers is refused at start.
func TestClusterTLSNeedsCA(t *testing.T) {
	certs, err := tlstest.Write(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &broker.Server{Dir: t.TempDir(), Port: -1, TLSCert: certs.Cert, TLSKey: certs.Key, ClusterTLS: true,
		Cluster: &broker.Cluster{Name: "test", Port: -1}}
	err = s.Start(t.Context())
	defer s.Close()
	if err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Fatalf("start: %v, want a refusal naming --tls-ca", err)
	}
}

// routeHandshake makes a TLS handshake with the route port at addr, presenting the test
// certificate and checking the port's against the CA, as a peer node does.
func routeHandshake(addr string, certs tlstest.Files) error {
	pair, err := tls.LoadX509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	d := &net.Dialer{Timeout: 5 * time.Second} // hang guard
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost"})
	if err != nil {
		return err
	}
	return c.Close()
}
