package cli_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdNATSConf starts a stock nats-server in the test process from a configuration file, as
// `nats-server -c FILE` would, and sets $VAR to its client URL; it stops when the script
// ends:
//
//	natsconf FILE VAR
//	natsconf -check FILE   only read the file, as nats-server -t does
func cmdNATSConf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: natsconf FILE VAR | natsconf -check FILE")
	}
	check := args[0] == "-check"
	if check {
		args = args[1:]
	}
	opts, err := server.ProcessConfigFile(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("natsconf: read %s: %v", args[0], err)
	}
	if check {
		if _, err := server.NewServer(opts); err != nil {
			ts.Fatalf("natsconf: configure from %s: %v", args[0], err)
		}
		return
	}
	opts.NoSigs, opts.NoLog = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		ts.Fatalf("natsconf: configure: %v", err)
	}
	go ns.Start()
	ts.Defer(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(20 * time.Second) { // a hang guard
		ts.Fatalf("natsconf: the server from %s is not ready", args[0])
	}
	ts.Setenv(args[1], ns.ClientURL())
}

// cmdTLSDial makes a TLS handshake with a listener, presenting DIR/cert.pem (as a peer
// node does on a route port) and checking the listener's certificate against DIR/ca.pem:
//
//	tlsdial HOST:PORT DIR
func cmdTLSDial(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: tlsdial HOST:PORT DIR")
	}
	dir := ts.MkAbs(args[1])
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		ts.Fatalf("tlsdial: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(ts.ReadFile(filepath.Join(dir, "ca.pem"))))
	d := &net.Dialer{Timeout: 5 * time.Second} // a hang guard
	c, err := tls.DialWithDialer(d, "tcp", args[0], &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost"})
	if err == nil {
		_ = c.Close()
	}
	switch {
	case err != nil && !neg:
		ts.Fatalf("tlsdial %s: %v", args[0], err)
	case err == nil && neg:
		ts.Fatalf("tlsdial %s: the handshake succeeded", args[0])
	}
}
