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
// Connections of other profiles (observers, the dashboard, daemons) are ignored.
//
// A server that goes away closes its connections without an event each. One that stops
// cleanly says so ($SYS.SERVER.<id>.SHUTDOWN); one that crashes says nothing. On a
// cluster the watcher asks the servers which of them answer and which their routes reach
// (ROUTEZ); the connections of a server gone from both are closed, and their peers marked
// as above. When the watcher's own system connection drops it reports it (Following) and,
// once back, sweeps again: the peers that lost their last connection meanwhile are marked.
//
// The presence TTL stays the fallback for what the watcher misses (no system account, a
// broker that sends no events, the time its own connection is down).
package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// DefaultOpTimeout bounds one presence read or write, and a sweep's wait for the first
// server's answer.
const DefaultOpTimeout = 5 * time.Second

// DefaultNodeCheck is how often, on a cluster, the watcher asks which servers are still
// routed to the others (a node that crashed sends no event for its connections).
const DefaultNodeCheck = 2 * time.Second

// Subjects of the broker's system account the watcher follows or asks.
const (
	connectSubject    = "$SYS.ACCOUNT.%s.CONNECT"
	disconnectSubject = "$SYS.ACCOUNT.%s.DISCONNECT"
	shutdownSubject   = "$SYS.SERVER.*.SHUTDOWN"
	sweepSubject      = "$SYS.REQ.SERVER.PING.CONNZ"
	routesSubject     = "$SYS.REQ.SERVER.PING.ROUTEZ"
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
	Presence jetstream.KeyValue
	// Conn, when set, is the connection Presence was opened on: an entry is then read
	// from its stream's leader, because on a cluster a replica's copy may not have the
	// latest write yet (a peer that just joined would read as absent, a stale revision
	// would fail the compare-and-set: the peer left to its TTL).
	Conn      *nats.Conn
	Logger    *slog.Logger     // nil means discard
	Now       func() time.Time // clock of the written ts; nil means time.Now
	OpTimeout time.Duration    // 0 means DefaultOpTimeout
	// NodeCheck is how often, while the watcher knows more than one server, it asks
	// which of them are still routed; 0 means DefaultNodeCheck, negative never.
	NodeCheck time.Duration
	// Marked, when set, is called after each presence entry the watcher wrote offline,
	// with the principal and the broker's stop time of the connection (tests, metrics).
	Marked func(p protocol.Principal, stop time.Time)
	// Following, when set, is called with false when the system connection drops (the
	// events are unheard until it is back: presence falls back to its TTL) and with true
	// once it is back and the watcher has caught up with what it missed.
	Following func(bool)
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
	open    map[protocol.Principal]map[connKey]string // each open connection's uid tag
	closed  map[connKey]struct{}                      // seen closed before a sweep was merged
	servers map[string]struct{}                       // servers that answered a sweep or sent an event
	leaving map[string]time.Time                      // servers that said they shut down, since
	suspect map[string]struct{}                       // servers one check found gone, unannounced
}

func newState() *state {
	return &state{open: map[protocol.Principal]map[connKey]string{}, closed: map[connKey]struct{}{},
		servers: map[string]struct{}{}, leaving: map[string]time.Time{}, suspect: map[string]struct{}{}}
}

// routeView is one answer to "which servers are there": the servers that answered a
// ROUTEZ ping and the servers their routes reach.
type routeView struct {
	answered, routed map[string]struct{}
}

// loop is one Run's working set.
type loop struct {
	w         *Watcher
	log       *slog.Logger
	opTimeout time.Duration
	st        *state
}

// Run follows the events until ctx ends (nil), the system connection is closed or the
// subscription fails. ready is called once the start sweep is merged and events are being
// applied.
func (w *Watcher) Run(ctx context.Context, ready func()) error {
	if err := protocol.CheckSpace(w.Space); err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	if w.Account == "" || w.Sys == nil || w.Presence == nil {
		return errors.New("liveness: want an account, a system connection and the presence bucket")
	}
	l := &loop{w: w, log: w.Logger, opTimeout: w.OpTimeout, st: newState()}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.log = l.log.With("space", w.Space)
	if l.opTimeout <= 0 {
		l.opTimeout = DefaultOpTimeout
	}

	// Status changes first: a drop between the subscriptions and the sweep is not lost.
	status := w.Sys.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CONNECTED, nats.CLOSED)
	defer w.Sys.RemoveStatusListener(status)
	events := make(chan *nats.Msg, eventBuffer)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, subject := range []string{fmt.Sprintf(connectSubject, w.Account), fmt.Sprintf(disconnectSubject, w.Account), shutdownSubject} {
		s, err := w.Sys.ChanSubscribe(subject, events)
		if err != nil {
			return fmt.Errorf("liveness %s: follow %s: %w", w.Space, subject, err)
		}
		subs = append(subs, s)
	}
	if err := w.Sys.FlushTimeout(l.opTimeout); err != nil {
		return fmt.Errorf("liveness %s: follow the connection events: %w", w.Space, err)
	}

	if _, err := w.sweep(ctx, l.opTimeout, l.st); err != nil {
		// Without the sweep a peer with two connections could be marked offline when one
		// closes; its next heartbeat rewrites it, so say so and go on.
		l.log.Warn("liveness: the start sweep failed; a peer with more than one connection may flicker offline", "err", err)
	}
	// Events that came during the sweep are applied after it, in order: a connection
	// they opened or closed ends as they say.
	l.log.Info("presence goes offline as soon as an agent's connection drops", "agents", len(l.st.open), "servers", len(l.st.servers))
	if ready != nil {
		ready()
	}

	var tick <-chan time.Time
	if every := w.nodeCheck(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	views := make(chan routeView, 1)
	checking := false
	check := func() {
		if checking || (len(l.st.servers) < 2 && len(l.st.leaving) == 0) {
			return // one server: its connections' events come from it, or it is gone with the watcher's
		}
		checking = true
		go func() { views <- w.routes(ctx, l.opTimeout) }()
	}
	// A server that said it shuts down still closes its clients after saying so (and a
	// peer's last write may land meanwhile): its peers are marked once the check finds it
	// unrouted, checked again every leavingCheck until leavingMax.
	var recheck <-chan time.Time
	following := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-events:
			if server, ok := shutdownServer(m.Subject); ok {
				if _, known := l.st.servers[server]; known {
					l.st.leaving[server] = time.Now()
					check()
				}
				continue
			}
			l.apply(ctx, m)
		case s := <-status:
			switch s {
			case nats.CLOSED:
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("liveness %s: the system connection closed", w.Space)
			case nats.CONNECTED:
				if following {
					continue
				}
				following = true
				l.resync(ctx)
				l.log.Info("liveness: the system connection is back; presence goes offline at once again", "agents", len(l.st.open))
				if w.Following != nil {
					w.Following(true)
				}
				check()
			default:
				if !following {
					continue
				}
				following = false
				l.log.Warn("liveness: the system connection dropped; until it is back, presence goes offline by its TTL")
				if w.Following != nil {
					w.Following(false)
				}
			}
		case <-tick:
			if following {
				check()
			}
		case v := <-views:
			checking = false
			lost := l.st.lost(v)
			for server := range l.st.suspect {
				if !slices.Contains(lost, server) {
					delete(l.st.suspect, server) // it answered or is routed again
				}
			}
			for _, server := range lost {
				why := "its server shut down"
				if _, said := l.st.leaving[server]; !said {
					// Unannounced: one late answer is not a loss; a second check decides.
					if _, again := l.st.suspect[server]; !again {
						l.st.suspect[server] = struct{}{}
						continue
					}
					why = "its server left the cluster"
				}
				l.serverGone(ctx, server, why)
			}
			for server, since := range l.st.leaving {
				if time.Since(since) > leavingMax {
					delete(l.st.leaving, server)
				}
			}
			if len(l.st.leaving)+len(l.st.suspect) > 0 && recheck == nil {
				recheck = time.After(leavingCheck)
			}
		case <-recheck:
			recheck = nil
			check()
		}
	}
}

// A server that sent its SHUTDOWN event is checked every leavingCheck for leavingMax;
// after that the periodic node check goes on (a lame-duck stop closes its clients slowly,
// each with its own event). A server one check found gone without saying so is checked
// again after leavingCheck, and dropped only when that check finds it gone too.
const (
	leavingCheck = 50 * time.Millisecond
	leavingMax   = 30 * time.Second
)

func (w *Watcher) nodeCheck() time.Duration {
	if w.NodeCheck == 0 {
		return DefaultNodeCheck
	}
	return w.NodeCheck
}

// shutdownServer reads the server id of a $SYS.SERVER.<id>.SHUTDOWN event's subject.
func shutdownServer(subject string) (string, bool) {
	t := strings.Split(subject, ".")
	if len(t) != 4 || t[0] != "$SYS" || t[1] != "SERVER" || t[3] != "SHUTDOWN" || t[2] == "" {
		return "", false
	}
	return t[2], true
}

// ask publishes a system request on subject and hands each server's answer to each: the
// first within opTimeout, the next ones until connz.Quiet passes without one. It reports
// how many servers answered.
func (w *Watcher) ask(ctx context.Context, opTimeout time.Duration, subject string, req any, each func([]byte) error) (int, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("ask %s: %w", subject, err)
	}
	inbox := w.Sys.NewInbox()
	sub, err := w.Sys.SubscribeSync(inbox)
	if err != nil {
		return 0, fmt.Errorf("ask %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := w.Sys.PublishRequest(subject, inbox, body); err != nil {
		return 0, fmt.Errorf("ask %s: %w", subject, err)
	}
	for wait, n := opTimeout, 0; ; wait, n = connz.Quiet, n+1 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if n > 0 && ctx.Err() == nil {
				return n, nil
			}
			return n, fmt.Errorf("ask %s: %w", subject, err)
		}
		if err := each(m.Data); err != nil {
			return n, fmt.Errorf("ask %s: %w", subject, err)
		}
	}
}

// sweep lists the account's open connections on every server (CONNZ with their JWT
// tags) into st and returns the servers that answered.
func (w *Watcher) sweep(ctx context.Context, opTimeout time.Duration, st *state) (map[string]struct{}, error) {
	answered := map[string]struct{}{}
	_, err := w.ask(ctx, opTimeout, sweepSubject, struct {
		Account string `json:"acc"`
		Auth    bool   `json:"auth"`
		Limit   int    `json:"limit"`
	}{w.Account, true, 1 << 20}, func(b []byte) error {
		var page struct {
			Data *struct {
				ID    string `json:"server_id"`
				Conns []struct {
					CID  uint64   `json:"cid"`
					Tags []string `json:"tags"`
				} `json:"connections"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &page); err != nil || page.Data == nil || page.Data.ID == "" {
			return fmt.Errorf("an answer without a connection listing: %s", b)
		}
		answered[page.Data.ID] = struct{}{}
		st.servers[page.Data.ID] = struct{}{}
		for _, c := range page.Data.Conns {
			if id, ok := agentOf(c.Tags); ok {
				st.add(id, connKey{page.Data.ID, c.CID})
			}
		}
		return nil
	})
	return answered, err
}

// routes asks every reachable server for its routes. A failed ask is an empty view,
// which names no server lost.
func (w *Watcher) routes(ctx context.Context, opTimeout time.Duration) routeView {
	v := routeView{answered: map[string]struct{}{}, routed: map[string]struct{}{}}
	_, err := w.ask(ctx, opTimeout, routesSubject, struct{}{}, func(b []byte) error {
		var page struct {
			Data *struct {
				ID     string `json:"server_id"`
				Routes []struct {
					RemoteID string `json:"remote_id"`
				} `json:"routes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &page); err != nil || page.Data == nil || page.Data.ID == "" {
			return fmt.Errorf("an answer without a route listing: %s", b)
		}
		v.answered[page.Data.ID] = struct{}{}
		for _, r := range page.Data.Routes {
			v.routed[r.RemoteID] = struct{}{}
		}
		return nil
	})
	if err != nil {
		w.logger().Debug("liveness: the route check failed", "space", w.Space, "err", err)
		return routeView{}
	}
	return v
}

func (w *Watcher) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
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

// apply folds one event into the state and, for the last connection of an agent, marks it.
func (l *loop) apply(ctx context.Context, m *nats.Msg) {
	var ev event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		l.log.Debug("liveness: unreadable event", "subject", m.Subject, "err", err)
		return
	}
	if ev.Client.Account != "" && ev.Client.Account != l.w.Account {
		return
	}
	id, ok := agentOf(ev.Client.Tags)
	if !ok || ev.Server.ID == "" || ev.Client.ID == 0 {
		return // not an agent's connection
	}
	st := l.st
	st.servers[ev.Server.ID] = struct{}{}
	k := connKey{ev.Server.ID, ev.Client.ID}
	switch ev.Type {
	case typeConnect:
		if _, gone := st.closed[k]; !gone {
			st.add(id, k)
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
		l.log.Debug("liveness: another connection of the peer is open", "peer", id.principal.String())
		return
	}
	stop := time.Now()
	if ev.Client.Stop != nil {
		stop = *ev.Client.Stop
	}
	l.mark(ctx, id.principal, []string{id.uid}, stop, "its connection closed")
}

// mark writes p offline when its entry belongs to one of uids' incarnations.
func (l *loop) mark(ctx context.Context, p protocol.Principal, uids []string, stop time.Time, why string) {
	c, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	// A write may fail for a moment when the bucket's leader was on a server that just
	// went away; try again until the bound.
	marked, err := l.w.markOffline(c, p, uids)
	for wait := 50 * time.Millisecond; err != nil && c.Err() == nil; wait = min(2*wait, time.Second) {
		select {
		case <-c.Done():
		case <-time.After(wait):
			marked, err = l.w.markOffline(c, p, uids)
		}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return // the watcher is stopping
	case err != nil:
		l.log.Warn("liveness: could not mark the peer offline; its presence TTL will", "peer", p.String(), "err", err)
	case marked:
		l.log.Debug("liveness: peer offline, "+why, "peer", p.String())
		if l.w.Marked != nil {
			l.w.Marked(p, stop)
		}
	}
}

// serverGone drops every connection the watcher knew on server and marks the peers that
// had no other.
func (l *loop) serverGone(ctx context.Context, server, why string) {
	gone := l.st.dropServer(server)
	if len(gone) > 0 {
		l.log.Info("liveness: a server is gone; its peers go offline", "server", server, "why", why, "peers", len(gone))
	}
	now := time.Now()
	for p, uids := range gone {
		l.mark(ctx, p, uids, now, why)
	}
}

// resync sweeps again after the system connection came back: the peers whose every
// connection closed while the watcher was deaf are marked, the connections opened
// meanwhile are known. Connections on a server that did not answer are kept; the node
// check decides about that server.
func (l *loop) resync(ctx context.Context) {
	fresh := newState()
	answered, err := l.w.sweep(ctx, l.opTimeout, fresh)
	if err != nil {
		l.log.Warn("liveness: the sweep after the system connection came back failed; peers that left meanwhile go offline by their TTL", "err", err)
		return
	}
	gone := map[protocol.Principal][]string{}
	for p, set := range l.st.open {
		for k, uid := range set {
			if _, ok := answered[k.server]; !ok {
				fresh.add(identity{p, uid}, k)
				fresh.servers[k.server] = struct{}{}
				continue
			}
			gone[p] = append(gone[p], uid)
		}
	}
	for p := range fresh.open {
		delete(gone, p)
	}
	fresh.closed, fresh.leaving, fresh.suspect = l.st.closed, l.st.leaving, l.st.suspect
	l.st = fresh
	now := time.Now()
	for p, uids := range gone {
		l.mark(ctx, p, uids, now, "its connection closed while the watcher was away")
	}
}

// markOffline rewrites principal's presence entry offline at the revision it read, when
// the entry is online and belongs to the incarnation of one of the closed connections
// (uids: their credentials' uid tags). It reports whether it wrote.
func (w *Watcher) markOffline(ctx context.Context, principal protocol.Principal, uids []string) (bool, error) {
	key := principal.String()
	value, rev, err := w.read(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read presence %s: %w", key, err)
	}
	p, err := protocol.DecodePresence(key, value)
	if err != nil {
		return false, nil // not a record a reader would show; leave it to its TTL
	}
	if p.Status == protocol.StatusOffline {
		return false, nil
	}
	if !ofIncarnation(p.LifecycleUID, uids) {
		return false, nil // written by another incarnation of the principal
	}
	// Edit only what a leave changes, keeping every field a peer wrote (a reference
	// peer's own extensions included).
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(value, &raw); err != nil {
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
	if _, err := w.Presence.Update(ctx, key, b, rev); err != nil {
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

// read returns key's entry and revision: from the stream's leader when Conn is set, else
// through Presence. A deleted or purged entry is jetstream.ErrKeyNotFound.
func (w *Watcher) read(ctx context.Context, key string) ([]byte, uint64, error) {
	if w.Conn == nil {
		e, err := w.Presence.Get(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		return e.Value(), e.Revision(), nil
	}
	bucket := w.Presence.Bucket()
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, 0, err
	}
	m, err := w.Conn.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Message *struct {
			Seq     uint64 `json:"seq"`
			Data    []byte `json:"data"`
			Headers []byte `json:"hdrs"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("the bucket leader's answer: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, 0, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("the bucket leader: %d %s", resp.Error.ErrCode, resp.Error.Description)
	case resp.Message == nil:
		return nil, 0, errors.New("the bucket leader answered without a message")
	}
	if len(resp.Message.Headers) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Headers)
		if err != nil {
			return nil, 0, fmt.Errorf("the bucket leader's headers: %w", err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, 0, jetstream.ErrKeyNotFound
		}
	}
	return resp.Message.Data, resp.Message.Seq, nil
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

// ofIncarnation reports whether a record written by incarnation uid may be marked for
// connections minted for uids: a side that names none matches any.
func ofIncarnation(uid string, uids []string) bool {
	if uid == "" || len(uids) == 0 {
		return true
	}
	for _, u := range uids {
		if u == "" || u == uid {
			return true
		}
	}
	return false
}

func (s *state) add(id identity, k connKey) {
	set := s.open[id.principal]
	if set == nil {
		set = map[connKey]string{}
		s.open[id.principal] = set
	}
	set[k] = id.uid
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

// dropServer forgets server and every connection on it, and returns the peers left with
// no open connection, with the uid tags of the connections they lost.
func (s *state) dropServer(server string) map[protocol.Principal][]string {
	delete(s.servers, server)
	delete(s.leaving, server)
	delete(s.suspect, server)
	gone := map[protocol.Principal][]string{}
	for p, set := range s.open {
		var uids []string
		for k, uid := range set {
			if k.server == server {
				delete(set, k)
				uids = append(uids, uid)
			}
		}
		if len(uids) > 0 && len(set) == 0 {
			delete(s.open, p)
			gone[p] = uids
		}
	}
	return gone
}

// lost names the servers holding known connections that neither answered v's ping nor
// are reached by a route of a server that did: gone from the cluster. An empty view
// names none.
func (s *state) lost(v routeView) []string {
	if len(v.answered) == 0 {
		return nil
	}
	var out []string
	for server := range s.servers {
		_, answered := v.answered[server]
		_, routed := v.routed[server]
		if !answered && !routed {
			out = append(out, server)
		}
	}
	return out
}
