package meshview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// DefaultPresenceEvery is how often a watcher applies held presence changes (see
// Watcher.PresenceEvery).
const DefaultPresenceEvery = 100 * time.Millisecond

// Watcher feeds a Model from a space. Set fields before Run.
type Watcher struct {
	// Endpoint is the observer's connection. It must not Join: a watcher is hidden from
	// the roster and takes no work. Run does not close it.
	Endpoint *client.Endpoint
	Model    *Model
	// DMs taps direct messages and anycasts too (inst.> and svc.>), which needs an admin
	// credential on an authenticated mesh; false taps the chat plane only.
	DMs bool
	// History, when set, reads each known channel's recent posts once at start (for
	// example client.Endpoint.ReadHistory through the delivery daemon). A failure is kept
	// in HistoryErr, never passed over silently.
	History func(ctx context.Context, channel string) ([]protocol.Message, error)
	// Reader, when set, is the name of the history reader the Endpoint's credential may
	// create on the chat and DM streams (an admin's chathist_<o>-<a>-<uid>): the newest
	// StoredTail messages of each are read at start straight from the streams, and History
	// is not used. A failure is kept in HistoryErr.
	Reader     string
	StoredTail int // 0 means DefaultStoredTail
	// PresenceEvery bounds how often presence changes reach the model: the first change
	// after a quiet interval applies at once, later ones within the interval are held,
	// the latest per peer, and applied together when it ends. A peer writing its key in a
	// loop costs the model (and every feed) one change per interval, not one per write.
	// 0 means DefaultPresenceEvery; a negative value applies every change (no coalescing).
	PresenceEvery time.Duration
	Logger        *slog.Logger // nil means discard

	mu         sync.Mutex
	historyErr error
}

// HistoryErr is why the start-up history read failed, or nil.
func (w *Watcher) HistoryErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.historyErr
}

// Run taps the space until ctx ends: the presence watch, and one plain subscription per
// messaging plane. It calls ready once every subscription is live and returns nil when
// ctx ends, or an error naming what failed.
func (w *Watcher) Run(ctx context.Context, ready func()) error {
	if w.Endpoint == nil || w.Model == nil {
		return errors.New("meshview: a watcher needs an Endpoint and a Model")
	}
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ep := w.Endpoint
	space := ep.Space()
	changes, err := ep.WatchPresence(ctx)
	if err != nil {
		return fmt.Errorf("meshview %s: presence: %w", space, err)
	}
	msgs := make(chan *nats.Msg, 4096)
	subjects := []string{protocol.ChatAll(space)}
	if w.DMs {
		subjects = append(subjects, protocol.InstAll(space), protocol.SvcAll(space))
	}
	for _, s := range subjects {
		sub, err := ep.Conn().Subscribe(s, func(m *nats.Msg) {
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("meshview %s: subscribe %s: %w", space, s, err)
		}
		if err := sub.SetPendingLimits(-1, 64<<20); err != nil {
			return fmt.Errorf("meshview %s: subscribe %s: %w", space, s, err)
		}
		defer func() { _ = sub.Unsubscribe() }() // the tap is over; nothing to report to
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	err = ep.Conn().FlushWithContext(fctx)
	fcancel()
	if err != nil {
		return fmt.Errorf("meshview %s: subscribe: %w", space, err)
	}
	if err := ep.Conn().LastError(); err != nil && errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("meshview %s: the broker refused the tap: %w", space, err)
	}
	switch {
	case w.Reader != "":
		if err := w.prefillStored(ctx); err != nil {
			w.setHistoryErr(err)
			log.Warn("history not read", "err", err)
		}
	case w.History != nil:
		w.prefill(ctx, log)
	}
	if ready != nil {
		ready()
	}
	every := w.PresenceEvery
	if every == 0 {
		every = DefaultPresenceEvery
	}
	var (
		pending = map[string]client.Peer{} // the latest held change per peer
		order   []string                   // peers in pending, in the order first held
		tick    *time.Timer
		tickC   <-chan time.Time // nil while the interval is not running
	)
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ep.Lost():
			return fmt.Errorf("meshview %s: connection lost: %w", space, ep.LostErr())
		case <-tickC:
			if len(pending) == 0 {
				tickC = nil // quiet: the next change applies at once
				continue
			}
			for _, id := range order {
				w.Model.ApplyPeer(pending[id])
			}
			clear(pending)
			order = order[:0]
			tick.Reset(every)
		case c, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("meshview %s: presence watch ended: %w", space, ep.LostErr())
			}
			switch {
			case every < 0:
				w.Model.ApplyPeer(c.Peer)
			case tickC == nil:
				w.Model.ApplyPeer(c.Peer)
				if tick == nil {
					tick = time.NewTimer(every)
				} else {
					tick.Reset(every)
				}
				tickC = tick.C
			default:
				if _, held := pending[c.Card.ID]; !held {
					order = append(order, c.Card.ID)
				}
				pending[c.Card.ID] = c.Peer
			}
		case m := <-msgs:
			r, err := protocol.Receive(m.Subject, m.Data)
			if err != nil {
				log.Warn("message dropped", "subject", m.Subject, "err", err)
				continue
			}
			w.Model.ApplyMessage(r)
		}
	}
}

// prefill reads the recent posts of every channel the space holds into the model.
func (w *Watcher) prefill(ctx context.Context, log *slog.Logger) {
	stats, err := w.Endpoint.ChannelStats(ctx)
	if err != nil {
		w.setHistoryErr(fmt.Errorf("list channels: %w", err))
		return
	}
	for _, st := range stats {
		if st.Messages == 0 {
			continue
		}
		page, err := w.History(ctx, st.Name)
		if err != nil {
			w.setHistoryErr(fmt.Errorf("history of %s: %w", st.Name, err))
			log.Warn("channel history not read", "channel", st.Name, "err", err)
			return // the same cause would refuse every channel
		}
		for _, m := range page {
			p, err := protocol.ParsePrincipal(m.From.ID)
			if err != nil || m.Channel != st.Name {
				continue // the daemon checked it; an odd item is not shown
			}
			w.Model.ApplyMessage(protocol.Received{Kind: protocol.DeliveryChannel, Message: m,
				Subject: protocol.Subject{Space: w.Endpoint.Space(), Kind: protocol.KindChat, Sender: p, Channel: st.Name}})
		}
	}
}

func (w *Watcher) setHistoryErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.historyErr = err
}
