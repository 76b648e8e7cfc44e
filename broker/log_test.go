package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
)

func TestFatalfRecordsInsteadOfExiting(t *testing.T) {
	l := newNATSLogger(slog.New(slog.DiscardHandler))
	cause := fmt.Errorf("listen tcp: %w", syscall.EADDRINUSE)
	l.Fatalf("Error listening on port: %s, %q", "127.0.0.1:1", cause)
	l.Fatalf("a second fatal is only logged")
	select {
	case err := <-l.fatal:
		if !errors.Is(err, syscall.EADDRINUSE) || !isAddrInUse(err) {
			t.Fatalf("fatal error %v does not unwrap to its cause", err)
		}
		if err.Error() != `Error listening on port: 127.0.0.1:1, "listen tcp: address already in use"` {
			t.Fatalf("fatal message %q", err)
		}
	default:
		t.Fatal("Fatalf recorded nothing")
	}
	select {
	case err := <-l.fatal:
		t.Fatalf("second fatal recorded: %v", err)
	default:
	}
}
