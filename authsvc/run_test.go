package authsvc

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/meshtest"
)

// memStore is a bearer.Store in memory, as an embedder's vault would be.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return v, nil
}

func (s *memStore) Create(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return fs.ErrExist
	}
	s.m[key] = value
	return nil
}

// TestParseArgs: Run's flags reach the Config, and combinations that make no sense refuse.
func TestParseArgs(t *testing.T) {
	c, err := ParseArgs([]string{"--trust", "t", "--server", "nats://127.0.0.1:1", "--space", "team", "--port", "7420",
		"--auth-timeout", "3s", "--service-endpoints", "--exchange-public-port", "7451", "--exchange-trusted-proxy"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.TrustDir != "t" || c.Space != "team" || c.Port != 7420 || c.AuthTimeout != 3*time.Second || !c.ServiceEndpoints ||
		c.Public.Port != 7451 || !c.Public.TrustedProxy {
		t.Fatalf("config: %+v", c)
	}
	for _, args := range [][]string{
		{"--server", "nats://x:1", "--space", "a"},                                                       // no trust folder
		{"--trust", "t", "--space", "a"},                                                                 // no server
		{"--trust", "t", "--server", "nats://x:1"},                                                       // no space
		{"--trust", "t", "--server", "nats://x:1", "--space", "a", "--spaces", "m.json"},                 // both
		{"--trust", "t", "--server", "nats://x:1", "--spaces", "m.json", "--port", "1"},                  // port on a host
		{"--trust", "t", "--server", "nats://x:1", "--space", "a", "--callout-only"},                     // callout-only, one space
		{"--trust", "t", "--server", "nats://x:1", "--space", "a", "--exchange-public-url", "https://x"}, // url without port
		{"--trust", "t", "--server", "nats://x:1", "--space", "a", "extra"},
	} {
		if _, err := ParseArgs(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestRun: an embedder runs the auth service with its secrets in its own store, for one
// space (--space) and as a host (--spaces) alike.
func TestRun(t *testing.T) {
	f := startLane(t)
	if err := f.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := Enable(f.Chain, testSpace, "https://idp.test", "cotal"); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "spaces.json")
	if err := os.WriteFile(manifest, []byte(`{"version": 2, "spaces": [{"space": "`+testSpace+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, flag, value string }{
		{"one space", "--space", testSpace},
		{"host", "--spaces", manifest},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &memStore{m: map[string][]byte{}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, []string{"--trust", f.Chain.Dir(), "--server", f.URL, c.flag, c.value}, store)
			}()
			meshtest.Until(t, "auth-service.json", deadline, func() bool {
				_, err := ReadStatus(f.dir)
				return err == nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			for _, k := range []string{"issuer.json", "owner-secret.json"} {
				found := false
				for key := range store.m {
					found = found || strings.HasSuffix(key, "/"+k)
				}
				if !found {
					t.Errorf("the store holds no %s: %v", k, keys(store.m))
				}
			}
			if _, err := ReadStatus(f.dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("status after Run: %v", err)
			}
		})
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
