// Package liveness marks a peer offline the instant the broker reports that the
// connection carrying its identity closed, instead of when its presence entry's TTL runs
// out.
//
// A Watcher holds a system-account connection and follows the space account's
// $SYS.ACCOUNT.<account>.CONNECT and .DISCONNECT events. It keeps, per principal, the set
// of open connections whose credential names that principal (the owner:, actor:, uid: and
// profile: tags the account signed into the user JWT: never a name the client chose), seeded
// by one CONNZ sweep at start. When the last open connection of a peer (profile agent,
// manager, or provisioner: a person joined from the CLI) closes, it rewrites that
// principal's own presence entry the way a clean leave does: the same record with status
// offline, a fresh ts and statusSince. It does so only
//
//   - when the record is online and was written by the incarnation the closed credential
//     was minted for (the record's lifecycleUid equals the credential's uid tag, when both
//     are set), and
//   - at the revision it read (a compare-and-set), so a reconnecting peer that re-announced
//     in between is never marked offline by the event of its old connection.
//
// Connections of other profiles (observers, the dashboard, daemons) are ignored. The
// presence TTL stays the fallback for what the watcher misses (no system account, a
// broker that sends no events).
package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// DefaultOpTimeout bounds one presence read or write, and the start sweep's wait.
const DefaultOpTimeout = 5 * time.Second

// Event subjects of the broker, per account.
const (
	connectSubject    = "$SYS.ACCOUNT.%s.CONNECT"
	disconnectSubject = "$SYS.ACCOUNT.%s.DISCONNECT"
	sweepSubject      = "$SYS.REQ.SERVER.PING.CONNZ"
)

// eventBuffer is how many events may wait while the watcher sweeps or writes.
const eventBuffer = 8192

// Watcher marks presence offline on disconnect events. Set its fields before Run.
type Watcher struct {
	Space   string     // space token; required
	Account string     // the space account's public key; required
	Sys     *nats.Conn // a system-account connection; required, not closed by Run
	// Presence is the space's presence bucket, opened through a credential that may
	// write its entries; required.
	Presence  jetstream.KeyValue
	Logger    *slog.Logger     // nil means discard
	Now       func() time.Time // clock of the written ts; nil means time.Now
	OpTimeout time.Duration    // 0 means DefaultOpTimeout
	// Marked, when set, is called after each presence entry the watcher wrote offline,
	// with the principal and the broker's stop time of the connection (tests, metrics).
	Marked func(p protocol.Principal, stop time.Time)
}

// connKey names one connection: the server's id and the connection id it gave.
type connKey struct {
	server string
	cid    uint64
}

// identity is what a connection's credential says about its holder.
type identity struct {
	principal protocol.Principal
	uid       string
}

// state is the watcher's view of the open agent connections, owned by Run's loop.
type state struct {
	open   map[protocol.Principal]map[connKey]struct{}
	closed map[connKey]struct{} // seen closed before the sweep was merged
}

// Run follows the events until ctx ends (nil) or the subscription fails. ready is called
// once the start sweep is merged and events are being applied.
func (w *Watcher) Run(ctx context.Context, ready func()) error {
	if err := protocol.CheckSpace(w.Space); err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	if w.Account == "" || w.Sys == nil || w.Presence == nil {
		return errors.New("liveness: want an account, a system connection and the presence bucket")
	}
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("space", w.Space)
	opTimeout := w.OpTimeout
	if opTimeout <= 0 {
		opTimeout = DefaultOpTimeout
	}

	events := make(chan *nats.Msg, eventBuffer)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, f := range []string{connectSubject, disconnectSubject} {
		subject := fmt.Sprintf(f, w.Account)
		s, err := w.Sys.ChanSubscribe(subject, events)
		if err != nil {
			return fmt.Errorf("liveness %s: follow %s: %w", w.Space, subject, err)
		}
		subs = append(subs, s)
	}
	if err := w.Sys.FlushTimeout(opTimeout); err != nil {
		return fmt.Errorf("liveness %s: follow the connection events: %w", w.Space, err)
	}

	st := &state{open: map[protocol.Principal]map[connKey]struct{}{}, closed: map[connKey]struct{}{}}
	if err := w.sweep(ctx, opTimeout, st); err != nil {
		// Without the sweep a peer with two connections could be marked offline when one
		// closes; its next heartbeat rewrites it, so say so and go on.
		log.Warn("liveness: the start sweep failed; a peer with more than one connection may flicker offline", "err", err)
	}
	// Events that came during the sweep are applied after it, in order: a connection
	// they opened or closed ends as they say.
	log.Info("presence goes offline as soon as an agent's connection drops", "agents", len(st.open))
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-events:
			w.apply(ctx, log, opTimeout, st, m)
		}
	}
}

// sweep lists the account's open connections on every server (CONNZ with their JWT
// tags) into st: each server answers once; the sweep ends connz.Quiet after the last
// answer.
func (w *Watcher) sweep(ctx context.Context, opTimeout time.Duration, st *state) error {
	body, err := json.Marshal(struct {
		Account string `json:"acc"`
		Auth    bool   `json:"auth"`
		Limit   int    `json:"limit"`
	}{w.Account, true, 1 << 20})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	inbox := w.Sys.NewInbox()
	sub, err := w.Sys.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := w.Sys.PublishRequest(sweepSubject, inbox, body); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for wait, n := opTimeout, 0; ; wait, n = connz.Quiet, n+1 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if n > 0 && ctx.Err() == nil {
				return nil
			}
			return fmt.Errorf("sweep %s: %w", sweepSubject, err)
		}
		var page struct {
			Data *struct {
				ID    string `json:"server_id"`
				Conns []struct {
					CID  uint64   `json:"cid"`
					Tags []string `json:"tags"`
				} `json:"connections"`
			} `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &page); err != nil || page.Data == nil {
			return fmt.Errorf("sweep: an answer without a connection listing: %s", m.Data)
		}
		for _, c := range page.Data.Conns {
			if id, ok := agentOf(c.Tags); ok {
				st.add(id.principal, connKey{page.Data.ID, c.CID})
			}
		}
	}
}

// event is the part of the broker's CONNECT and DISCONNECT events the watcher reads.
type event struct {
	Type   string `json:"type"`
	Server struct {
		ID string `json:"id"`
	} `json:"server"`
	Client struct {
		Start   *time.Time `json:"start"`
		Stop    *time.Time `json:"stop"`
		ID      uint64     `json:"id"`
		Account string     `json:"acc"`
		Tags    []string   `json:"tags"`
		Kind    string     `json:"kind"`
	} `json:"client"`
}

// Event types the broker sends.
const (
	typeConnect    = "io.nats.server.advisory.v1.client_connect"
	typeDisconnect = "io.nats.server.advisory.v1.client_disconnect"
)

// apply folds one event into st and, for the last connection of an agent, marks it.
func (w *Watcher) apply(ctx context.Context, log *slog.Logger, opTimeout time.Duration, st *state, m *nats.Msg) {
	var ev event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		log.Debug("liveness: unreadable event", "subject", m.Subject, "err", err)
		return
	}
	if ev.Client.Account != "" && ev.Client.Account != w.Account {
		return
	}
	id, ok := agentOf(ev.Client.Tags)
	if !ok || ev.Server.ID == "" || ev.Client.ID == 0 {
		return // not an agent's connection
	}
	k := connKey{ev.Server.ID, ev.Client.ID}
	switch ev.Type {
	case typeConnect:
		if _, gone := st.closed[k]; !gone {
			st.add(id.principal, k)
		}
		return
	case typeDisconnect:
	default:
		return
	}
	st.closed[k] = struct{}{}
	if len(st.closed) > eventBuffer {
		clear(st.closed) // only needed for the sweep's races; bounded
	}
	if st.remove(id.principal, k) {
		log.Debug("liveness: another connection of the peer is open", "peer", id.principal.String())
		return
	}
	stop := time.Now()
	if ev.Client.Stop != nil {
		stop = *ev.Client.Stop
	}
	c, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	marked, err := w.markOffline(c, id)
	switch {
	case err != nil:
		log.Warn("liveness: could not mark the peer offline; its presence TTL will", "peer", id.principal.String(), "err", err)
	case marked:
		log.Debug("liveness: peer offline, its connection closed", "peer", id.principal.String(), "cid", k.cid, "server", k.server)
		if w.Marked != nil {
			w.Marked(id.principal, stop)
		}
	}
}

// markOffline rewrites id's presence entry offline at the revision it read, when the
// entry is online and belongs to id's incarnation. It reports whether it wrote.
func (w *Watcher) markOffline(ctx context.Context, id identity) (bool, error) {
	key := id.principal.String()
	e, err := w.Presence.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read presence %s: %w", key, err)
	}
	p, err := protocol.DecodePresence(key, e.Value())
	if err != nil {
		return false, nil // not a record a reader would show; leave it to its TTL
	}
	if p.Status == protocol.StatusOffline {
		return false, nil
	}
	if id.uid != "" && p.LifecycleUID != "" && id.uid != p.LifecycleUID {
		return false, nil // written by another incarnation of the principal
	}
	// Edit only what a leave changes, keeping every field a peer wrote (a reference
	// peer's own extensions included).
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(e.Value(), &raw); err != nil {
		return false, nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ms := now().UnixMilli()
	raw["status"], _ = json.Marshal(protocol.StatusOffline)
	raw["ts"], _ = json.Marshal(ms)
	raw["statusSince"], _ = json.Marshal(ms)
	b, err := json.Marshal(raw)
	if err != nil {
		return false, fmt.Errorf("encode presence %s: %w", key, err)
	}
	if _, err := w.Presence.Update(ctx, key, b, e.Revision()); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil // rewritten since it was read: the peer is back
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return false, nil
		}
		return false, fmt.Errorf("write presence %s offline: %w", key, err)
	}
	return true, nil
}

// agentOf reads the identity a credential's tags name, when it is a peer that keeps a
// presence entry: an agent, a manager, or a person joined from the CLI (`cotal join`
// connects with the project's provisioner profile, in the person's own name).
func agentOf(tags []string) (identity, bool) {
	var id identity
	var profile string
	for _, t := range tags {
		k, v, _ := strings.Cut(t, ":")
		switch k {
		case "owner":
			id.principal.Owner = v
		case "actor":
			id.principal.Actor = v
		case "uid":
			id.uid = v
		case "profile":
			profile = v
		}
	}
	switch trust.Profile(profile) {
	case trust.ProfileAgent, trust.ProfileManager, trust.ProfileProvisioner:
	default:
		return identity{}, false
	}
	if id.principal.Validate() != nil {
		return identity{}, false
	}
	return id, true
}

func (s *state) add(p protocol.Principal, k connKey) {
	set := s.open[p]
	if set == nil {
		set = map[connKey]struct{}{}
		s.open[p] = set
	}
	set[k] = struct{}{}
}

// remove drops k from p's open connections and reports whether another stays open.
func (s *state) remove(p protocol.Principal, k connKey) bool {
	set := s.open[p]
	delete(set, k)
	if len(set) == 0 {
		delete(s.open, p)
		return false
	}
	return true
}
