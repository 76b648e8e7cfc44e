package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// serveDelivery runs space's delivery daemon on m until the test ends, and returns once
// it serves.
func serveDelivery(t *testing.T, m *meshtest.Mesh, space string) {
	t.Helper()
	lane := &delivery.Lane{Space: space, Server: m.URL, Logger: brokertest.Logger(t), Creds: m.Mint(space, meshtest.DeliverySpec()),
		ReconnectWait: 50 * time.Millisecond, AckWait: 2 * time.Second, OpTimeout: 3 * time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- lane.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("delivery lane: %v", err)
	case <-time.After(hangGuard):
		t.Fatal("delivery lane did not serve")
	}
}
