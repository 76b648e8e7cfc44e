package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ParentFDEnv names an inherited pipe that ties a supervised daemon's life to the process
// that started it (the broker process of `cotal up`): the parent keeps the write end and
// never writes, so a read sees end-of-file once the parent is gone, however it ended
// (SIGKILL included).
const ParentFDEnv = "COTAL_PARENT_FD"

// ErrParentGone is the cause of a WithParent context that ended because the parent did.
var ErrParentGone = errors.New("the process that started this daemon is gone")

// WithParent returns a context that ends when ctx does or, with ParentFDEnv set, when the
// parent ends (context.Cause is then ErrParentGone). stop releases the watch; call it when
// done. Without the variable it returns ctx itself: the process was started by hand.
func WithParent(ctx context.Context, getenv func(string) string) (_ context.Context, stop func(), _ error) {
	fdText := ""
	if getenv != nil {
		fdText = getenv(ParentFDEnv)
	}
	if fdText == "" {
		return ctx, func() {}, nil
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 0 {
		return nil, nil, fmt.Errorf("%s=%q: want a file descriptor number", ParentFDEnv, fdText)
	}
	f := parentPipe(fd)
	if f == nil {
		return nil, nil, fmt.Errorf("%s=%d: not an open pipe on this system", ParentFDEnv, fd)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, f) // returns at end-of-file (the parent is gone) or on Close
		cancel(ErrParentGone)
	}()
	return cctx, func() {
		cancel(context.Canceled)
		_ = f.Close() // a read-only pipe end: nothing to flush
		<-done
	}, nil
}
