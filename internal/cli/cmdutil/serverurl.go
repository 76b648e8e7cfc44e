package cmdutil

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/internal/redact"
)

// serverSchemes are the URL schemes a client's --server may use: NATS (nats://), NATS over
// TLS (tls://, or nats+tls://, which clients read as tls://) and NATS over a WebSocket
// (ws://, wss://).
func serverSchemes() []string { return []string{"nats", "tls", "nats+tls", "ws", "wss"} }

// CheckServerURLs checks a --server value a client dials: one URL or a comma-separated
// list of them, each with a scheme of nats, tls, nats+tls, ws or wss, a host, and no user,
// password, path, query or fragment (a credential goes in --creds, never in a URL). The
// error never repeats a user or password the value carried.
func CheckServerURLs(list string) error {
	n := 0
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		n++
		if err := checkServerURL(raw, serverSchemes(), false); err != nil {
			return err
		}
	}
	if n == 0 {
		return errors.New("want a NATS URL, e.g. nats://127.0.0.1:4222 (several: comma-separated)")
	}
	return nil
}

// CheckListenURL checks the URL a broker listens on (cotal up --server): nats://host:port,
// with no user, password, path, query or fragment. The error never repeats a secret.
func CheckListenURL(raw string) (*url.URL, error) {
	if err := checkServerURL(raw, []string{"nats"}, true); err != nil {
		return nil, err
	}
	return url.Parse(raw)
}

// checkServerURL checks one URL against schemes, as a broker's listen URL when listen.
func checkServerURL(raw string, schemes []string, listen bool) error {
	const example = "nats://127.0.0.1:4222"
	shown := redact.URL(raw)
	want := strings.Join(schemes, "://, ") + "://"
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("%q has no scheme: want %s, e.g. %s", shown, want, example)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL, e.g. %s", shown, example)
	}
	switch {
	case !slices.Contains(schemes, u.Scheme):
		return fmt.Errorf("%q: %s:// is not a scheme of a NATS server URL; want %s, e.g. %s", shown, u.Scheme, want, example)
	case u.User != nil && listen:
		return fmt.Errorf("%q carries a user or password, which a broker's listen URL does not take: "+
			"peers sign in with creds the project mints (nothing was started); listen on the URL alone, e.g. %s", shown, example)
	case u.User != nil:
		return fmt.Errorf("%q carries a user or password, which is not supported (nothing was sent): "+
			"connect with the URL alone and a creds file (--creds), e.g. %s", shown, example)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host, e.g. %s", shown, example)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%q has a path, query or fragment, which a NATS server URL does not take, e.g. %s", shown, example)
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil && port == "" {
		return fmt.Errorf("%q has an empty port, e.g. %s", shown, example)
	}
	return nil
}
