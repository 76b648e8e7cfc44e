package workspace

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// brokerKeys are the keys the broker block knows.
func brokerKeys() []string { return []string{"servers", "host", "auth"} }

// broker reads the broker block.
func (y *yamlFile) broker(n *yaml.Node) (ManifestBroker, error) {
	b := ManifestBroker{Auth: AuthStatic}
	if isNull(n) {
		return b, nil
	}
	fields, err := y.known(n, "broker", brokerKeys())
	if err != nil {
		return b, err
	}
	if kv := fields["servers"]; kv != nil {
		v := resolve(kv.value)
		var list []string
		if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			for _, s := range strings.Split(v.Value, ",") {
				list = append(list, strings.TrimSpace(s))
			}
		} else if list, err = y.strs(v, "broker.servers"); err != nil {
			return b, err
		}
		for _, s := range list {
			if err := checkServerURL(s); err != nil {
				return b, y.errAt(v, "broker.servers: %w", err)
			}
		}
		b.Servers = list
	}
	if kv := fields["host"]; kv != nil {
		if b.Host, err = y.str(kv.value, "broker.host"); err != nil {
			return b, err
		}
		if b.Host != "" && net.ParseIP(b.Host) == nil && !validHostname(b.Host) {
			return b, y.errAt(kv.value, "broker.host %q: want an interface address such as 127.0.0.1 or 0.0.0.0 (no port)", b.Host)
		}
	}
	if kv := fields["auth"]; kv != nil {
		v := resolve(kv.value)
		switch {
		case isNull(v):
		case v.Kind == yaml.ScalarNode && v.Tag == "!!bool":
			on, err := y.boolean(v, "broker.auth")
			if err != nil {
				return b, err
			}
			if !*on {
				b.Auth = AuthOpen
			}
		default:
			if b.Auth, err = y.oneOf(v, "broker.auth", AuthStatic, AuthUser); err != nil {
				return b, fmt.Errorf("%w (or true, or false for an open mesh)", err)
			}
			if b.Auth == "" {
				b.Auth = AuthStatic
			}
		}
	}
	return b, nil
}

// checkServerURL accepts nats://host:port or tls://host:port without credentials.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a nats://host:port URL", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q holds credentials: a manifest never does; agents get theirs when they start", u.Redacted())
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port %s is not 0 to 65535", s, u.Port())
	}
	return nil
}

// validHostname accepts letters, digits, - and . (a DNS name).
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if c != '-' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}
