package oidctest

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// loopback is what an Issuer and a RefIdP share: an Ed25519 signing key with its kid, and
// an HTTP server on 127.0.0.1 at a free port.
type loopback struct {
	mu   sync.Mutex
	kid  string
	key  ed25519.PrivateKey
	srv  *http.Server
	done chan struct{}
}

// start generates the signing key, listens on 127.0.0.1 at a free port, calls ready with
// the origin http://127.0.0.1:<port> (to set what the handlers read) and then serves h
// until stop.
func (l *loopback) start(h http.Handler, ready func(origin string)) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("oidctest: signing key: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("oidctest: listen: %w", err)
	}
	ready("http://" + ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	l.mu.Lock()
	l.kid, l.key, l.srv, l.done = randString(8), priv, srv, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after stop
	}()
	return nil
}

// stop stops the server and waits until it has stopped. It is a no-op before start.
func (l *loopback) stop() error {
	l.mu.Lock()
	srv, done := l.srv, l.done
	l.srv = nil
	l.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-done
	if err != nil {
		return fmt.Errorf("oidctest: close: %w", err)
	}
	return nil
}

// keyID is the kid of the published key.
func (l *loopback) keyID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kid
}

// jwk is the published key: its public half, kid and alg EdDSA.
func (l *loopback) jwk() jose.JSONWebKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return jose.JSONWebKey{Key: l.key.Public(), KeyID: l.kid, Algorithm: string(jose.EdDSA)}
}

// sign signs claims as a JWT with the published key (EdDSA, its kid), adding the extra
// protected headers; who names the server in the error before start.
func (l *loopback) sign(who string, claims any, headers map[string]any) (string, error) {
	l.mu.Lock()
	key, kid := l.key, l.kid
	l.mu.Unlock()
	if key == nil {
		return "", errors.New("oidctest: sign: " + who + " not started")
	}
	o := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid)
	for k, v := range headers {
		o = o.WithHeader(jose.HeaderKey(k), v)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, o)
	if err != nil {
		return "", fmt.Errorf("oidctest: signer: %w", err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("oidctest: sign: %w", err)
	}
	return tok, nil
}

// startForTest starts s, failing t when it cannot, and closes it when the test ends; what
// names s in the failures.
func startForTest(t testing.TB, s interface {
	Start() error
	Close() error
}, what string) {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", what, err)
		}
	})
}
