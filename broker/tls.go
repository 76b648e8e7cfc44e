package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// tlsTimeout bounds a client's TLS handshake.
const tlsTimeout = 5 * time.Second

// ErrTLSPair reports a TLS certificate without its key, or a key without its certificate.
var ErrTLSPair = errors.New("a TLS certificate and its key go together: give both --tls-cert and --tls-key")

// tlsConfig loads the server's certificate (and the client CA, when set).
func (s *Server) tlsConfig() (*tls.Config, error) {
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: s.TLSCert, KeyFile: s.TLSKey, CaFile: s.TLSCA, Timeout: tlsTimeout.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", s.TLSCert, s.TLSKey, err)
	}
	return tc, nil
}

// RouteTLSConfig is the TLS config of the cluster (route) port when ClusterTLS is set: the
// client certificate and key, with TLSCA (required) checking the peers' certificates both
// ways, as routes authenticate each other. It is nil, nil without ClusterTLS.
func (s *Server) RouteTLSConfig() (*tls.Config, error) {
	if !s.ClusterTLS {
		return nil, nil
	}
	if s.TLSCert == "" || s.TLSKey == "" || s.TLSCA == "" {
		return nil, errors.New("tls: the cluster port's TLS needs --tls-cert, --tls-key and --tls-ca (the CA that signed every node's certificate)")
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: s.TLSCert, KeyFile: s.TLSKey, CaFile: s.TLSCA, Verify: true, Timeout: tlsTimeout.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("tls: cluster certificate %s: %w", s.TLSCert, err)
	}
	// A node dials the others too: the CA checks the certificate a peer serves as well as
	// the one it presents (nats-server's own configuration parser does the same).
	tc.RootCAs = tc.ClientCAs
	return tc, nil
}
