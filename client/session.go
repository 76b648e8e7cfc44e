package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrSessionLive reports that another live session of the same principal consumes its
// direct messages, so a second one would split them.
var ErrSessionLive = errors.New("another session of this name is live")

// soleSession (Config.SoleSession) refuses to consume the DM durable cons while another
// connection consumes it: the broker counts the pull requests waiting on it and drops
// those of a connection that is gone, so a session that crashed or closed does not count,
// and one that lives does. The broker drops a gone connection's requests a moment after
// the connection ends, so a session that starts right after its predecessor died reads
// the count again for up to sessionSettle before it refuses. Two sessions starting in the
// same instant may both pass; one at a time never do.
func (e *Endpoint) soleSession(ctx context.Context, cons jetstream.Consumer) error {
	info := cons.CachedInfo()
	deadline := time.Now().Add(sessionSettle)
	for info != nil && info.NumWaiting > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		if info, err = cons.Info(ctx); err != nil {
			return fmt.Errorf("check for another session of %s: %w", e.me, err)
		}
	}
	if info == nil || info.NumWaiting == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is already connected to space %q in another session, which takes its direct messages (two sessions would split them); close that session first, or use another name",
		ErrSessionLive, e.me, e.cfg.Space)
}

// sessionSettle is how long soleSession waits for a gone session's pull requests to leave
// the broker's count.
const sessionSettle = 3 * time.Second

// otherSessionLive reports, as Close leaves, whether another connection still consumes
// this principal's DM durable: another session of the same name, which keeps the shared
// presence record fresh, so this one must not write it offline. Its own consume must have
// been stopped; it waits (briefly) until the stop reached the broker, so its own pull
// requests are no longer counted. Any doubt (no durable, the broker does not answer) is
// false: the record is written offline as before.
func (e *Endpoint) otherSessionLive() bool {
	e.mu.Lock()
	cons, cc := e.dmCons, e.dmCC
	e.mu.Unlock()
	if cons == nil || cc == nil || !e.nc.IsConnected() {
		return false
	}
	select {
	case <-cc.Closed():
	case <-time.After(time.Second):
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := cons.Info(ctx)
	return err == nil && info.NumWaiting > 0
}
