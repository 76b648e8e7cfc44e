package a2apeer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/cotal-ai/cotal/internal/redact"
)

// MaxCardSize bounds an Agent Card: a larger one is refused, never read whole.
const MaxCardSize = 1 << 20

// MaxResponseSize bounds one JSON-RPC answer of an external agent.
const MaxResponseSize = 4 << 20

// maxRedirects bounds the redirects followed, all on the URL's own origin.
const maxRedirects = 3

// CardPath is where an A2A agent serves its card (A2A v0.3), under its base URL.
const CardPath = "/.well-known/agent-card.json"

// ErrURL reports a URL an external agent may not be reached at: not https, plain http
// off loopback, credentials in it, or a redirect to another origin.
var ErrURL = errors.New("not an allowed A2A URL")

// CheckURL parses raw and accepts it when it is an absolute https URL, or http on a
// loopback host (127.0.0.0/8, ::1 or localhost), with no user info or fragment.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	shown := redact.URL(raw) // a refusal never repeats a password or a query's token
	if err != nil {
		return nil, fmt.Errorf("%w: %q: not a URL: %w", ErrURL, shown, redact.ParseError(err))
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("%w: %q: want an https URL (or http on loopback)", ErrURL, shown)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: %q: no host", ErrURL, shown)
	case u.User != nil:
		return nil, fmt.Errorf("%w: %q: credentials in the URL; give a token with --token-file instead", ErrURL, shown)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: %q: a fragment has no meaning here", ErrURL, shown)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return nil, fmt.Errorf("%w: %q: plain http only on loopback (127.0.0.1, ::1, localhost); use https", ErrURL, shown)
	}
	return u, nil
}

// loopbackHost reports whether host is localhost or a loopback address literal.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// origin is a URL's scheme and host (with port) in lower case.
func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// HTTP says how the bridge and the registering command reach external agents.
type HTTP struct {
	// TLS is the TLS config of https requests; nil means the system's roots.
	TLS *tls.Config
	// Timeout bounds one request (card fetch, or one JSON-RPC call); 0 means 30 s.
	Timeout time.Duration
}

// client returns an HTTP client for u's origin: it follows at most maxRedirects
// redirects and only on that origin, and for plain http it connects only to loopback
// addresses, whatever a name resolves to.
func (h HTTP) client(u *url.URL) *http.Client {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	d := &net.Dialer{Timeout: timeout}
	if u.Scheme == "http" {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("%w: plain http to %s, which is not a loopback address", ErrURL, host)
			}
			return nil
		}
	}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		TLSClientConfig:       h.TLS,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       time.Minute,
		ForceAttemptHTTP2:     true,
	}
	home := origin(u)
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrURL, maxRedirects)
			}
			if origin(req.URL) != home {
				return fmt.Errorf("%w: redirect from %s to another origin (%s): register the URL it ends at", ErrURL, home, origin(req.URL))
			}
			return nil
		},
	}
}

// readBounded reads r whole unless it holds more than limit bytes, which is an error
// naming what and the limit.
func readBounded(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over the %d-byte limit", what, limit)
	}
	return b, nil
}

// CardURL is where the card of the agent registered at raw is read: raw itself when its
// path ends in .json (a card's own URL), else CardPath under it.
func CardURL(raw string) (*url.URL, error) {
	u, err := CheckURL(raw)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(u.Path, ".json") {
		return u, nil
	}
	c := *u
	c.Path = strings.TrimSuffix(u.Path, "/") + CardPath
	c.RawPath = ""
	return &c, nil
}

// FetchCard reads and validates the Agent Card of the agent registered at raw (see
// CardURL), sending token as a bearer when it is not "". It refuses a URL CheckURL
// refuses, a redirect to another origin, a card over MaxCardSize, and a card Validate
// refuses; it returns the card and the URL it was read from.
func (h HTTP) FetchCard(ctx context.Context, raw, token string) (*Card, *url.URL, error) {
	cu, err := CardURL(raw)
	if err != nil {
		return nil, nil, err
	}
	shown := redact.URL(cu.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cu.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", shown, err)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client(cu).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", shown, redact.RequestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("agent card %s: HTTP %s: is the URL the agent's base URL or its card's?", shown, resp.Status)
	}
	if resp.ContentLength > MaxCardSize {
		return nil, nil, fmt.Errorf("agent card %s: %d bytes, over the %d-byte limit", shown, resp.ContentLength, MaxCardSize)
	}
	b, err := readBounded(resp.Body, MaxCardSize, "the card")
	if err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", shown, err)
	}
	card, err := ParseCard(b)
	if err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", shown, err)
	}
	if err := card.Validate(cu); err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", shown, err)
	}
	return card, cu, nil
}
