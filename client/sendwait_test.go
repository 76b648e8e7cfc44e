package client_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/provision"
)

// retrySignal is a log handler that reports each resend of a send.
type retrySignal struct{ retried chan<- struct{} }

func (h retrySignal) Enabled(context.Context, slog.Level) bool { return true }
func (h retrySignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "send retried with the same id" {
		select {
		case h.retried <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h retrySignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h retrySignal) WithGroup(string) slog.Handler      { return h }

// withoutStream connects alice to a space whose CHAT stream was deleted (a broker that
// lost it, or is restarting), and returns her, a JetStream context of its own and the
// signal of her resends.
func withoutStream(t *testing.T) (*client.Endpoint, jetstream.JetStream, <-chan struct{}) {
	t.Helper()
	url := mesh(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(t.Context(), "CHAT_main"); err != nil {
		t.Fatal(err)
	}
	retried := make(chan struct{}, 1)
	alice, err := client.Connect(t.Context(), url, client.Config{Space: space, Name: "alice", Logger: slog.New(retrySignal{retried})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Close() })
	return alice, js, retried
}

// A post that no stream answers is sent again, with the same id, until the stream is
// back: it is then stored once.
func TestPostResentUntilTheStreamIsBack(t *testing.T) {
	alice, js, retried := withoutStream(t)
	type result struct {
		sent client.Sent
		err  error
	}
	done := make(chan result, 1)
	go func() {
		sent, err := alice.Post(context.Background(), "general", client.Text("held"))
		done <- result{sent, err}
	}()
	select {
	case <-retried:
	case r := <-done:
		t.Fatalf("the post ended before any resend: %+v, %v", r.sent, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the post was not resent")
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.sent.Seq != 1 || r.sent.Duplicate {
		t.Fatalf("post: %+v, %v; want stored as the stream's first message", r.sent, r.err)
	}
	if n := streamMsgs(t, alice, "CHAT_main"); n != 1 {
		t.Fatalf("CHAT holds %d messages, want 1", n)
	}
}

// A send whose context has no deadline still ends: after sendTimeout (10 s), with the
// context's deadline error, not after the minute of resends (which ends with the last
// resend's error, not a deadline). A slow machine only makes it later, so only the
// lower bound is checked.
func TestPostWithoutDeadlineIsBounded(t *testing.T) {
	alice, _, _ := withoutStream(t)
	start := time.Now()
	_, err := alice.Post(context.Background(), "general", client.Text("lost"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("post without a stream: %v; want the deadline exceeded", err)
	}
	if took := time.Since(start); took < 9*time.Second {
		t.Fatalf("post gave up after %s; want the 10 s bound", took)
	}
}
