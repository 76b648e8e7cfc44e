package client

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrSessionLive reports that another live session of the same principal consumes its
// direct messages, so a second one would split them.
var ErrSessionLive = errors.New("another session of this name is live")

// soleSession refuses to consume the DM durable cons while another connection consumes
// it: the broker counts the pull requests waiting on it and drops those of a connection
// that is gone, so a session that crashed or closed does not count, and one that lives
// does. Two sessions starting in the same instant may both pass; one at a time never do.
func (e *Endpoint) soleSession(cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	if info == nil || info.NumWaiting == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is already connected to space %q in another session, which takes its direct messages (two sessions would split them); close that session first, or use another name",
		ErrSessionLive, e.me, e.cfg.Space)
}
