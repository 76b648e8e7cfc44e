package exchangewire

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/cotal-ai/cotal/internal/redact"
)

// URLError is a URL refused by one of the rules below. Msg says what is wrong without
// naming the field or setting that held the URL, so a caller can name it its own way (the
// exchange's public-face settings name their flag); Err is the parse error behind it, if any.
type URLError struct {
	Msg string
	Err error // the underlying cause; may be nil
}

// Error reads "<msg>" or "<msg>: <cause>".
func (e *URLError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the underlying cause.
func (e *URLError) Unwrap() error { return e.Err }

// CheckHTTPS checks an absolute https:// URL with a host and no userinfo; base also refuses
// a query or fragment (clients append paths to it). A refusal is a *URLError.
func CheckHTTPS(raw string, base bool) error {
	if err := checkWebURL(raw, base, false); err != nil {
		return err
	}
	return nil
}

// checkEndpointURL checks an absolute https URL with a host and no userinfo, or an http one
// whose host is a loopback IP literal; base also refuses a query or fragment.
func checkEndpointURL(raw string, base bool) error {
	if err := checkWebURL(raw, base, true); err != nil {
		return err
	}
	return nil
}

// checkWebURL is CheckHTTPS that, with loopbackHTTP, also accepts http:// on a loopback IP
// literal host.
func checkWebURL(raw string, base, loopbackHTTP bool) *URLError {
	u, err := url.Parse(raw)
	shown := redact.URL(raw)
	switch {
	case err != nil:
		return &URLError{Msg: fmt.Sprintf("%q is not a URL", shown), Err: redact.ParseError(err)}
	case loopbackHTTP && u.Scheme == "http" && !loopbackIP(u.Hostname()):
		return &URLError{Msg: fmt.Sprintf("%q: http is allowed only on a loopback IP; use https://", shown)}
	case u.Scheme != "https" && !(loopbackHTTP && u.Scheme == "http"):
		return &URLError{Msg: fmt.Sprintf("%q must start with https://", shown)}
	case u.Host == "" || u.Hostname() == "":
		return &URLError{Msg: fmt.Sprintf("%q has no host", shown)}
	case u.User != nil:
		return &URLError{Msg: fmt.Sprintf("%q must not carry a user or password", shown)}
	case base && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#")):
		return &URLError{Msg: fmt.Sprintf("%q must not carry a query or fragment: clients append paths to it", shown)}
	}
	return nil
}

// brokerScheme reports whether s is a URL scheme a broker address may use.
func brokerScheme(s string) bool {
	switch s {
	case "nats", "tls", "ws", "wss":
		return true
	}
	return false
}

// TLSScheme reports whether a broker URL's scheme always means TLS: tls and wss do.
func TLSScheme(scheme string) bool { return scheme == "tls" || scheme == "wss" }

// CheckServer checks the broker URL a discovery bundle (or a mesh registered from one)
// gives clients: a nats:, tls:, ws: or wss: URL with a host, no userinfo and no empty
// port, and tlsRequired true for tls: and wss:.
func CheckServer(raw string, tlsRequired bool) error {
	if err := CheckBrokerURL(raw); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if u, _ := url.Parse(raw); TLSScheme(u.Scheme) && !tlsRequired {
		return fmt.Errorf("tlsRequired: false contradicts server %q", raw)
	}
	return nil
}

// CheckBrokerURL checks a nats:, tls:, ws: or wss: URL with a host, no userinfo and no
// empty port. A refusal is a *URLError.
func CheckBrokerURL(raw string) error {
	u, err := url.Parse(raw)
	shown := redact.URL(raw)
	switch {
	case err != nil:
		return &URLError{Msg: fmt.Sprintf("%q is not a URL", shown), Err: redact.ParseError(err)}
	case !brokerScheme(u.Scheme):
		return &URLError{Msg: fmt.Sprintf("%q must be a nats://, tls://, ws:// or wss:// URL", shown)}
	case u.Host == "" || u.Hostname() == "":
		return &URLError{Msg: fmt.Sprintf("%q has no host", shown)}
	case u.User != nil:
		return &URLError{Msg: fmt.Sprintf("%q must not carry a user or password: the discovery bundle is public", shown)}
	case strings.HasSuffix(u.Host, ":"):
		return &URLError{Msg: fmt.Sprintf("%q has an empty port", shown)}
	}
	return nil
}

// loopbackIP reports whether host is a loopback IP literal.
func loopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
