//go:build unix

package cmdutil

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestWithParent: the context ends with ErrParentGone once the write end of the pipe
// closes (the parent ended), and stop ends the watch while the parent lives.
func TestWithParent(t *testing.T) {
	pipe := func() (fd int, w *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		fd, err = syscall.Dup(int(r.Fd())) // WithParent owns this one
		if err != nil {
			t.Fatal(err)
		}
		return fd, w
	}
	env := func(fd int) func(string) string {
		return func(k string) string {
			if k == ParentFDEnv {
				return strconv.Itoa(fd)
			}
			return ""
		}
	}

	fd, w := pipe()
	ctx, stop, err := WithParent(t.Context(), env(fd))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if ctx.Err() != nil {
		t.Fatal("ended while the parent lives")
	}
	w.Close() // the parent is gone
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end with the parent")
	}
	if !errors.Is(context.Cause(ctx), ErrParentGone) {
		t.Fatalf("cause %v, want ErrParentGone", context.Cause(ctx))
	}

	fd, w = pipe()
	defer w.Close()
	ctx, stop, err = WithParent(t.Context(), env(fd))
	if err != nil {
		t.Fatal(err)
	}
	stop() // returns: Close ends the pending read
	if errors.Is(context.Cause(ctx), ErrParentGone) {
		t.Fatal("stop reported the parent gone")
	}

	if ctx, stop, err := WithParent(t.Context(), func(string) string { return "" }); err != nil || ctx != t.Context() {
		t.Fatalf("without the variable: %v, %v", ctx, err)
	} else {
		stop()
	}
	if _, _, err := WithParent(t.Context(), func(string) string { return "x" }); err == nil {
		t.Fatal("a bad fd number was accepted")
	}
}
