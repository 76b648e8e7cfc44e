package client

import (
	"strings"

	"github.com/nats-io/nats.go"
)

// ServerURL reads a server URL, or a comma-separated list of them, the way nats.go dials
// it: nats+tls:// is written tls:// (nats.go knows the latter only); other URLs pass as
// they are. nats.go itself upgrades a nats:// URL to TLS when the server requires it.
func ServerURL(url string) string {
	parts := strings.Split(url, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if rest, ok := strings.CutPrefix(p, "nats+tls://"); ok {
			p = "tls://" + rest
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// TLSOptions are the connect options for a mesh whose server certificate is signed by the
// CA in the PEM file ca; none when ca is "" (the system's roots then judge a TLS server).
func TLSOptions(ca string) []nats.Option {
	if ca == "" {
		return nil
	}
	return []nats.Option{nats.RootCAs(ca)}
}
