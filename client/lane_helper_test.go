package client_test

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// serveDelivery runs space's delivery daemon on m until the test ends, and returns once
// it serves.
func serveDelivery(t *testing.T, m *meshtest.Mesh, space string) {
	t.Helper()
	lane := deliverytest.Lane(t, m, space)
	lane.AckWait = 2 * time.Second
	deliverytest.Serve(t, lane)
}
