// Package userauth is the client side of a user-auth space: it obtains Cotal bearers from
// the space's exchange and keeps a NATS connection, made with the space's deny-all
// sentinel creds and the bearer as its token, authorized past each bearer's expiry.
package userauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/trust"
)

// requestTimeout bounds one exchange request.
const requestTimeout = 10 * time.Second

// retryEvery is how soon a failed renewal is tried again.
const retryEvery = 5 * time.Second

// ErrRefused is wrapped by Exchange when the exchange refused the credential (401 or 403;
// the body's code and message are in the error). Throttling (429) and an unavailable
// exchange (503) are other errors: trying again later may succeed.
var ErrRefused = errors.New("exchange refused")

// Exchanger asks one space's exchange for bearers.
type Exchanger struct {
	URL  string       // the exchange's base URL, e.g. http://127.0.0.1:7420
	Cap  string       // the capability the loopback exchange requires; empty on a public face
	HTTP *http.Client // nil means a client with requestTimeout
}

// Exchange posts req to URL/exchange and returns the bearer it got.
func (x *Exchanger) Exchange(ctx context.Context, req exchangewire.Request) (exchangewire.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, x.URL+"/exchange", bytes.NewReader(body))
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange %s: %w", x.URL, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if x.Cap != "" {
		hr.Header.Set("Authorization", "Bearer "+x.Cap)
	}
	hc := x.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: requestTimeout}
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange %s: %w", x.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return exchangewire.Response{}, fmt.Errorf("exchange %s: %w", x.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		why := resp.Status
		var eb exchangewire.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Sentence() != "" {
			why = fmt.Sprintf("%d: %s", resp.StatusCode, eb.Sentence())
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return exchangewire.Response{}, fmt.Errorf("%w (%s)", ErrRefused, why)
		}
		return exchangewire.Response{}, fmt.Errorf("exchange %s: %s", x.URL, why)
	}
	var out exchangewire.Response
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" || out.Expiry().Unix() <= 0 {
		return exchangewire.Response{}, fmt.Errorf("exchange %s: malformed answer: %v", x.URL, err)
	}
	return out, nil
}

// Fetch obtains a fresh bearer: for a person, an exchange of a fresh IdP ID token; for an
// agent, of a still-valid bearer of its owner.
type Fetch func(ctx context.Context) (exchangewire.Response, error)

// Session holds the current bearer of one principal and renews it before it expires.
type Session struct {
	fetch Fetch
	log   *slog.Logger
	now   func() time.Time

	mu  sync.Mutex
	cur exchangewire.Response
}

// Start fetches the first bearer. log may be nil.
func Start(ctx context.Context, fetch Fetch, log *slog.Logger) (*Session, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Session{fetch: fetch, log: log, now: time.Now}
	first, err := fetch(ctx)
	if err != nil {
		return nil, err
	}
	s.cur = first
	return s, nil
}

// Current is the bearer in hand.
func (s *Session) Current() exchangewire.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Token is the bearer in hand, for nats.TokenHandler: every (re)connect presents the
// newest one.
func (s *Session) Token() string { return s.Current().Token }

// Options are the connect options of the session's principal: the sentinel creds, the
// bearer as the CONNECT token, a fresh inbox name as the connection name with its reply
// inbox (see InboxOptions), and reconnects that keep trying after an authorization error
// (a renewal may race a reconnect; the next attempt carries the newer bearer). Keep closes
// a connection whose actor lost its grant, instead of letting it retry forever.
func (s *Session) Options(sentinelCreds []byte) ([]nats.Option, error) {
	c, err := trust.ReadCreds(sentinelCreds)
	if err != nil {
		return nil, fmt.Errorf("sentinel creds: %w", err)
	}
	return append(append(c.Options(), InboxOptions(NewInboxName())...),
		nats.TokenHandler(s.Token),
		nats.IgnoreAuthErrorAbort(),
	), nil
}

// NewInboxName is a fresh connection name for a user-mode connection, as the reference's
// clients make it (packages/core standaloneConnectOpts): "ibx" + 32 random lower-case hex
// digits.
func NewInboxName() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "ibx" + hex.EncodeToString(b)
}

// InboxOptions name a user-mode connection name and make its reply inbox
// "_INBOX_<name>", the one the callout grants (see ValidInboxName).
func InboxOptions(name string) []nats.Option {
	return []nats.Option{nats.Name(name), nats.CustomInboxPrefix(InboxPrefix(name))}
}

// InboxPrefix is the reply-inbox prefix the callout grants a connection named name.
func InboxPrefix(name string) string { return "_INBOX_" + name }

// ValidInboxName reports whether name may name a user-mode connection and its inbox: 8 to
// 120 of A-Z a-z 0-9 _ -, the reference callout's rule (assertInboxConnId), so it holds no
// subject metacharacter.
func ValidInboxName(name string) bool {
	if len(name) < 8 || len(name) > 120 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '_' && c != '-' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// renewAt is when a bearer expiring at exp, in hand since now, is renewed: after two
// thirds of its remaining life, so a failed renewal has the last third to retry.
func renewAt(now, exp time.Time) time.Time {
	left := exp.Sub(now)
	if left <= 0 {
		return now
	}
	return now.Add(left * 2 / 3)
}

// Keep renews the bearer before it expires and moves nc onto the new one by reconnecting
// at once, so the broker never closes the connection for an expired authorization. When
// the broker refuses nc's reconnects (the grant was revoked and the connection evicted),
// it asks the exchange at once: a refusal there too closes nc, with the reason logged. It
// returns when ctx ends or nc is closed.
func (s *Session) Keep(ctx context.Context, nc *nats.Conn) {
	for {
		cur := s.Current()
		switch s.sleep(ctx, nc, time.Until(renewAt(s.now(), cur.Expiry()))) {
		case wakeStop:
			return
		case wakeRefused:
			next, err := s.fetch(ctx)
			if errors.Is(err, ErrRefused) {
				s.log.Error("the broker and the exchange refuse this actor now; closing the connection", "actor", cur.Actor, "err", err)
				nc.Close()
				return
			}
			if err == nil {
				s.set(next)
			}
			if s.sleep(ctx, nc, retryEvery) == wakeStop {
				return
			}
			continue
		}
		next, err := s.fetch(ctx)
		if err != nil {
			s.log.Warn("bearer renewal failed; retrying", "actor", cur.Actor, "expires", cur.Expiry(), "err", err)
			if s.sleep(ctx, nc, retryEvery) == wakeStop {
				return
			}
			continue
		}
		s.set(next)
		if err := nc.ForceReconnect(); err != nil {
			s.log.Warn("reconnect with the renewed bearer", "err", err)
		}
		s.log.Debug("bearer renewed", "actor", next.Actor, "expires", next.Expiry())
	}
}

// set makes next the bearer in hand.
func (s *Session) set(next exchangewire.Response) {
	s.mu.Lock()
	s.cur = next
	s.mu.Unlock()
}

// Why a sleep ended.
const (
	wakeTime    = iota // the time passed
	wakeStop           // ctx ended or nc closed
	wakeRefused        // nc is reconnecting and the broker refused its authorization
)

// sleep waits d, checking every second whether nc was closed or its reconnects are refused.
func (s *Session) sleep(ctx context.Context, nc *nats.Conn, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		if nc.IsClosed() || ctx.Err() != nil {
			return wakeStop
		}
		if nc.IsReconnecting() && errors.Is(nc.LastError(), nats.ErrAuthorization) {
			return wakeRefused
		}
		left := time.Until(deadline)
		if left <= 0 {
			return wakeTime
		}
		t := time.NewTimer(min(left, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return wakeStop
		case <-t.C:
		}
	}
}
