package cmdutil

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
)

// DialCreds connects to server with the creds file contents creds (nil: no credential),
// trusting the CA file ca for TLS ("": the system's roots), as the connection name
// (shown in the broker's CONNZ; "": none). It is for the CLI's own administrative
// connections (provisioning, system requests, backups), not for peers.
func DialCreds(server string, creds []byte, ca, name string) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Timeout(5 * time.Second)}, client.TLSOptions(ca)...)
	if name != "" {
		opts = append(opts, nats.Name(name))
	}
	if creds != nil {
		c, err := trust.ReadCreds(creds)
		if err != nil {
			return nil, err
		}
		opts = append(opts, c.Options()...)
	}
	nc, err := nats.Connect(server, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", server, err)
	}
	return nc, nil
}
