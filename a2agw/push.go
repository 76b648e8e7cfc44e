package a2agw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// pusher POSTs tasks to their push notification URLs, one at a time in order, never
// following a redirect. Without AllowRemotePush it dials loopback addresses only; with
// it, never this machine's own (loopback, unspecified, link-local), so a caller from
// elsewhere cannot reach the gateway host's local services. Both are checked on the
// address actually dialed, so a name that resolves elsewhere is refused.
type pusher struct {
	hc     *http.Client
	remote bool
	log    *slog.Logger
	queue  chan pushJob
}

type pushJob struct {
	cfg  PushConfig
	task Task
}

func newPusher(hc *http.Client, remote bool, log *slog.Logger) *pusher {
	if hc == nil {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			return dialable(net.ParseIP(host), remote, address)
		}}
		hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil}}
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &pusher{hc: &c, remote: remote, log: log, queue: make(chan pushJob, 256)}
}

// check accepts a push URL: http or https, a host, loopback unless remote pushes are
// allowed.
func (p *pusher) check(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("pushNotificationConfig.url %q: want an http or https URL without credentials", raw)
	}
	h := strings.Trim(u.Hostname(), "[]")
	ip := net.ParseIP(h)
	if h == "localhost" {
		ip = net.IPv6loopback
	}
	if ip == nil && p.remote {
		return nil // a name: checked on the address it resolves to, as it is dialed
	}
	if err := dialable(ip, p.remote, raw); err != nil {
		return fmt.Errorf("pushNotificationConfig.url: %w", err)
	}
	return nil
}

// dialable accepts a push address: loopback only, or with remote set anything but this
// machine's own addresses.
func dialable(ip net.IP, remote bool, what string) error {
	local := ip == nil || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()
	switch {
	case !remote && (ip == nil || !ip.IsLoopback()):
		return fmt.Errorf("push to %s refused: this gateway pushes to loopback addresses only (cotal a2a --allow-remote allows others)", what)
	case remote && local:
		return fmt.Errorf("push to %s refused: a gateway serving remote callers never pushes to this machine's own addresses", what)
	}
	return nil
}

func (p *pusher) enqueue(cfg PushConfig, t Task) {
	select {
	case p.queue <- pushJob{cfg, t}:
	default:
		p.log.Warn("a2a gateway: push queue full; a notification is dropped", "task", t.ID)
	}
}

func (p *pusher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.queue:
			if err := p.post(ctx, j); err != nil {
				p.log.Warn("a2a gateway: push notification", "task", j.task.ID, "url", j.cfg.URL, "err", err)
			}
		}
	}
}

// post sends one notification: the task as JSON, with the config's token in
// X-A2A-Notification-Token.
func (p *pusher) post(ctx context.Context, j pushJob) error {
	if err := p.check(j.cfg.URL); err != nil {
		return err
	}
	b, err := json.Marshal(j.task)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.cfg.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if j.cfg.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", j.cfg.Token)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return errors.New("answered " + resp.Status)
	}
	return nil
}
