package delivery

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The delivery-admin rail's workers answer a request while another is still being
// answered: a slow one (an eviction, a listing a server is slow to give) does not hold up
// the requests behind it. Here the first request's handling waits until the test lets it
// go, which it does only once the second was handled; handled one at a time, the second
// would never be.
func TestAdminWorkersAnswerPastASlowRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	release, handled := make(chan struct{}), make(chan string, 2)
	h := workers(ctx, &wg, adminWorkers, func(m *nats.Msg) {
		if m.Subject == "slow" {
			<-release
		}
		handled <- m.Subject
	})
	// The subscription's one goroutine delivers the requests in order, as nats.go does.
	go func() {
		h(&nats.Msg{Subject: "slow"})
		h(&nats.Msg{Subject: "next"})
	}()
	select {
	case got := <-handled:
		if got != "next" {
			t.Fatalf("handled %q first; want next, while slow is held", got)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the request behind a slow one was not handled")
	}
	close(release)
	if got := <-handled; got != "slow" {
		t.Fatalf("then handled %q; want slow", got)
	}
}

// Once the lane stops, its workers end and a request still waiting for one is dropped
// rather than blocking the subscription: the second request returns although the one
// worker is busy, and the worker ends once its request is done.
func TestAdminWorkersEndWithTheLane(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	block := make(chan struct{})
	h := workers(ctx, &wg, 1, func(*nats.Msg) { <-block })
	h(&nats.Msg{Subject: "a"}) // the one worker is busy with it
	cancel()
	returned := make(chan struct{})
	go func() {
		h(&nats.Msg{Subject: "b"}) // no worker is free: dropped, not waited for
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("a request after the lane stopped waited for a worker")
	}
	close(block)
	wg.Wait()
}
