package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// choosePort turns Server.Port into the port nats-server is given, probing the address
// first: nats-server reports a busy port only through its logger's Fatalf.
func choosePort(ctx context.Context, host string, port int) (int, error) {
	switch {
	case port == server.RANDOM_PORT:
		return port, nil
	case port == 0:
		err := probe(ctx, host, DefaultPort)
		if err == nil {
			return DefaultPort, nil
		}
		if errors.Is(err, ErrPortInUse) {
			return server.RANDOM_PORT, nil
		}
		return 0, err
	case port > 0 && port <= 65535:
		if err := probe(ctx, host, port); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("port %d: want 0 (default), -1 (any free port) or 1-65535", port)
}

// probe checks that host:port can be listened on, and releases it again.
func probe(ctx context.Context, host string, port int) error {
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", hp)
	if err != nil {
		if isAddrInUse(err) {
			return fmt.Errorf("listen on %s: %w", hp, ErrPortInUse)
		}
		return fmt.Errorf("listen on %s: %w", hp, err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("listen on %s: release probe: %w", hp, err)
	}
	return nil
}
