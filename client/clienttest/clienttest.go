// Package clienttest holds helpers for tests that drive a client.Endpoint. It imports
// only client, so the in-package tests of a package below internal/meshtest (trust's, whose
// package meshtest imports) can use it as well as every other test.
package clienttest

import (
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
)

// Receive returns the next message ep surfaces, failing the test when none comes within
// deadline. The deadline is a hang guard, not a timing assumption.
func Receive(t testing.TB, ep *client.Endpoint, deadline time.Duration) *client.Incoming {
	t.Helper()
	select {
	case in := <-ep.Messages():
		return in
	case <-time.After(deadline):
		t.Fatalf("no message within %s", deadline)
		return nil
	}
}
