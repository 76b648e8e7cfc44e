// The address the embedded broker listens on, and what may listen beyond loopback.

package up

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// listenAddr reads --server into a host and a broker.Server port.
func listenAddr(server string) (string, int, error) {
	if server == "" {
		return "127.0.0.1", 0, nil
	}
	if strings.Contains(server, ",") {
		return "", 0, fmt.Errorf("%q is a list of URLs, and cotal up listens on one address: give one nats://host:port URL (a list is for clients, --external and --routes)", server)
	}
	u, err := cmdutil.CheckListenURL(server)
	if err != nil {
		return "", 0, err
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, fmt.Errorf("%q needs a port, e.g. nats://127.0.0.1:4222", server)
	}
	if net.ParseIP(host) == nil && strings.Trim(host, "0123456789.") == "" {
		return "", 0, fmt.Errorf("%q: %s is not an IP address", server, host)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port %q is not 0 to 65535", server, portText)
	}
	if port == 0 {
		port = -1 // any free port
	}
	return host, port, nil
}

// listen is the host and broker.Server port the embedded broker binds: --server's (or the
// manifest's broker.servers'), else the manifest's broker.host on the default port, else
// loopback on the default port.
func (o *Options) listen() (string, int, error) {
	host, port, err := listenAddr(o.Server)
	if err == nil && o.Server == "" && o.manifest != nil && o.manifest.Broker.Host != "" {
		host = o.manifest.Broker.Host
	}
	return host, port, err
}

// checkOpenHost refuses an open mesh on a host beyond loopback: it has no authentication,
// so anyone who reaches the host could read and post in every space.
func (o *Options) checkOpenHost() error {
	if !o.Open {
		return nil
	}
	host, _, err := o.listen()
	if err != nil {
		return cmdutil.FlagErrorf("--server: %v", err)
	}
	if broker.IsLoopback(host) {
		return nil
	}
	return cmdutil.Refuse("an open mesh on "+host,
		"an open mesh has no authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost); "+
			"an authenticated mesh may listen on any address",
		"cotal up --detach --server "+o.Server)
}

// checkTLSHost refuses an authenticated mesh listening beyond loopback without TLS,
// unless --insecure-no-tls: its credentials' signatures and every message would cross
// the network in clear text.
func (o *Options) checkTLSHost() error {
	if o.Open || o.TLSCert != "" || o.InsecureNoTLS {
		return nil
	}
	host, _, err := o.listen()
	if err != nil {
		return cmdutil.FlagErrorf("--server: %v", err)
	}
	if broker.IsLoopback(host) {
		return nil
	}
	return cmdutil.Refuse("a mesh on "+host+" without TLS",
		"beyond loopback, messages and connections would cross the network in clear text; serve TLS (--tls-cert, --tls-key and --tls-ca) with a certificate for the names clients dial, "+
			"or pass --insecure-no-tls to accept that (nothing was started or written)",
		"")
}

// readyAddr is how a ready line names where the broker serves: the URL local clients
// dial, and the address bound when that differs from it (0.0.0.0:4222, every interface).
func readyAddr(url, listen string) string {
	if listen == "" || strings.TrimPrefix(strings.TrimPrefix(url, "nats://"), "tls://") == listen {
		return url
	}
	return url + ", listening on " + listen
}
