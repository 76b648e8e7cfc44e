package cmdutil

import (
	"context"

	"github.com/cotal-ai/cotal/internal/launch"
)

// ParentFDEnv names an inherited pipe that ties a supervised daemon's life to the process
// that started it (the broker process of `cotal up`); see launch.LifelineEnv.
const ParentFDEnv = launch.LifelineEnv

// ErrParentGone is the cause of a WithParent context that ended because the parent did.
var ErrParentGone = launch.ErrParentGone

// WithParent returns a context that ends when ctx does or, with ParentFDEnv set, when the
// parent ends (context.Cause is then ErrParentGone). stop releases the watch; call it when
// done. Without the variable it returns ctx itself: the process was started by hand.
func WithParent(ctx context.Context, getenv func(string) string) (_ context.Context, stop func(), _ error) {
	return launch.Lifeline(ctx, getenv)
}
