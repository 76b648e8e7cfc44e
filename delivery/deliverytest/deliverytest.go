// Package deliverytest runs a space's delivery daemon in integration tests: a lane on a
// meshtest broker with test timings, served until the test ends.
package deliverytest

import (
	"context"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// hangGuard bounds how long Serve waits for a lane to serve: it only keeps a broken
// lane from hanging the test, so it is far longer than a lane takes on a loaded machine.
const hangGuard = time.Minute

// Lane is the delivery lane of space on m with the daemon's own credential, the test's
// log, reconnects every 50 ms and broker operations bounded to 3 s. Change its fields
// (an ack wait, another log) before Serve.
func Lane(t testing.TB, m *meshtest.Mesh, space string) *delivery.Lane {
	t.Helper()
	return &delivery.Lane{Space: space, Server: m.URL, Logger: brokertest.Logger(t),
		Creds: m.Mint(space, meshtest.DeliverySpec()), ReconnectWait: 50 * time.Millisecond, OpTimeout: 3 * time.Second}
}

// Serve runs l until the test ends and returns once it serves. The test fails if the
// lane ends before it serves, does not serve within a minute, or ends with an error
// when it is stopped.
func Serve(t testing.TB, l *delivery.Lane) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background()) // stopped by its cleanup, in turn
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- l.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("delivery lane of %s ended before serving: %v", l.Space, err)
	case <-time.After(hangGuard):
		cancel()
		<-done
		t.Fatalf("delivery lane of %s did not serve within %s", l.Space, hangGuard)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("delivery lane of %s: %v", l.Space, err)
		}
	})
}
