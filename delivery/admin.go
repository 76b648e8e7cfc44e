package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
)

// The principal ops of the delivery-admin rail: principalLiveness (is a connection of one
// principal open?), evictPrincipal and evictPrincipals (close every open connection of
// them, then sweep again until none is left). All three sweep the space account's
// connections over the daemon's system connection ($SYS.REQ.SERVER.PING.CONNZ) and
// attribute each connection to the principal its user JWT names: the principal: tag the
// account signed into a minted credential, or, for a connection an auth callout admitted
// (whose tags the broker does not list), the JWT name the callout gave it, "<owner>-<actor>"
// ("<owner>.<actor>" from Go releases before the reference's form). A name the client chose
// never counts, and a principal matches only itself, whole. Without a system connection
// every op is refused, never answered "gone".

// sweepLimit is how many connections one CONNZ answer may list: every connection of the
// account at once, so that a connection closing between pages cannot shift one past the
// sweep; an answer cut short of its total leaves the sweep incomplete.
const sweepLimit = 1 << 20

// kicksInFlight bounds the KICK requests an eviction has outstanding at once.
const kicksInFlight = 16

// verifyRounds is how many rounds of kicks an eviction makes, each verified by a sweep
// that sees the principals gone or finds what the next round kicks.
const verifyRounds = 3

// platformOwnerPrefix starts a platform owner token, "p_" and 26 base32 letters: an owner
// the sweeps accept beside protocol.ValidOwner's.
const platformOwnerPrefix = "p_"

// connRef names one open connection: the server that holds it and its id there.
type connRef struct {
	server string
	cid    uint64
}

// sweep is what one listing of the account's connections found.
type sweep struct {
	complete bool
	note     string               // why it is not complete
	conns    map[string][]connRef // by principal dot-form
}

// sweepPrincipal parses a principal the principal ops accept: "<owner>.<actor>", the owner
// "local", or "u_" or "p_" and 26 base32 letters.
func sweepPrincipal(s string) (protocol.Principal, error) {
	owner, actor, ok := strings.Cut(s, ".")
	p := protocol.Principal{Owner: owner, Actor: actor}
	valid := protocol.ValidOwner(owner)
	if rest, platform := strings.CutPrefix(owner, platformOwnerPrefix); platform {
		valid = protocol.ValidOwner("u_" + rest) // the same 26 base32 letters
	}
	switch {
	case !ok:
		return p, fmt.Errorf("principal %q: want <owner>.<actor>", s)
	case !valid:
		return p, fmt.Errorf("principal %q: owner %q is not a principal owner (want local, or u_ or p_ followed by 26 base32 letters)", s, owner)
	case !protocol.ValidActor(actor):
		return p, fmt.Errorf("principal %q: actor %q is not an actor token (want 1 to %d of A-Z a-z 0-9 _)", s, actor, protocol.MaxActorLength)
	}
	return p, nil
}

// attribute names the principal a listed connection's credential stands for, "" for none:
// its first principal: tag when that names a principal, else a callout user's JWT name.
func attribute(c connz.Conn) string {
	for _, t := range c.Tags {
		if v, ok := strings.CutPrefix(t, "principal:"); ok {
			if _, err := sweepPrincipal(v); err == nil {
				return v
			}
			break // a tag that names no principal: the name may
		}
	}
	user := c.CalloutUser() // never a name the client sent beside a JWT of its own
	owner, actor, ok := strings.Cut(user, "-")
	if !ok {
		owner, actor, _ = strings.Cut(user, ".")
	}
	key := owner + "." + actor
	if _, err := sweepPrincipal(key); err != nil {
		return ""
	}
	return key
}

// decodePrincipalArgs reads the closed object {principal}.
func decodePrincipalArgs(raw json.RawMessage) (string, error) {
	var a struct {
		Principal *string `json:"principal"`
	}
	if err := strictjson.Decode(raw, &a); err != nil {
		return "", fmt.Errorf("args: %w", err)
	}
	if a.Principal == nil {
		return "", errors.New("args: want exactly {principal}")
	}
	if _, err := sweepPrincipal(*a.Principal); err != nil {
		return "", fmt.Errorf("args: %w", err)
	}
	return *a.Principal, nil
}

// decodePrincipalsArgs reads the closed object {principals}: 1 to EvictPrincipalsMax
// principals.
func decodePrincipalsArgs(raw json.RawMessage) ([]string, error) {
	var a struct {
		Principals *[]string `json:"principals"`
	}
	if err := strictjson.Decode(raw, &a); err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	if a.Principals == nil {
		return nil, errors.New("args: want exactly {principals}")
	}
	ps := *a.Principals
	if len(ps) == 0 || len(ps) > protocol.EvictPrincipalsMax {
		return nil, fmt.Errorf("args: principals: want 1 to %d, not %d", protocol.EvictPrincipalsMax, len(ps))
	}
	for i, p := range ps {
		if _, err := sweepPrincipal(p); err != nil {
			return nil, fmt.Errorf("args: principals[%d]: %w", i, err)
		}
	}
	return ps, nil
}

// canSweep refuses the principal ops of a daemon without a system connection: listing
// over the account's own import could say nothing of a cluster's other servers, and no
// KICK is possible.
func (o *oracle) canSweep(op string) error {
	switch {
	case o.nc == nil:
		return fmt.Errorf("%s: refused: %s", op, o.note)
	case o.account == "":
		return fmt.Errorf("%s: refused: the delivery daemon has no system-account connection (--system-creds), so it can neither sweep the space's connections completely nor close one", op)
	}
	return nil
}

// notSelf refuses an eviction of the daemon's own principal: it would close the
// connection that serves the rail, and the daemon would reconnect under it at once.
func (o *oracle) notSelf(p string) error {
	if p != "" && p == o.r.self {
		return fmt.Errorf("principal %s is this delivery daemon's own: evicting it would close the connection answering you, and nothing was kicked (stop the daemon to end its connections)", p)
	}
	return nil
}

// errNoEvictor refuses an eviction by a daemon without a credential that may KICK.
func errNoEvictor(op string) error {
	return fmt.Errorf("%s: refused: the delivery daemon has no evict credential (cotal deliver --evict-creds, which cotal up gives it), so it cannot close a connection; removal is deny-new only", op)
}

// sweep lists every open connection of the space's account and attributes it: CONNZ of
// every server and, from a cluster, ROUTEZ to learn which servers had to answer.
func (o *oracle) sweep(ctx context.Context) sweep {
	req := struct {
		Account string `json:"acc"`
		Auth    bool   `json:"auth"`
		Limit   int    `json:"limit"`
	}{o.account, true, sweepLimit}
	pages, err := connz.Ask(ctx, o.nc, "$SYS.REQ.SERVER.PING.CONNZ", req, standalone)
	if err != nil {
		return sweep{note: "CONNZ: " + err.Error()}
	}
	var routes []*connz.Page
	if !standalone(pages) {
		if routes, err = connz.Ask(ctx, o.nc, "$SYS.REQ.SERVER.PING.ROUTEZ", struct{}{}, nil); err != nil {
			routes = nil
		}
	}
	return tally(pages, routes, err)
}

// standalone reports whether the answers are one standalone server's (no cluster name).
func standalone(pages []*connz.Page) bool { return len(pages) == 1 && pages[0].Cluster == "" }

// tally attributes the listed connections. The sweep is complete when every server listed
// all of its connections and either one standalone server answered or, in a cluster, every
// server the ROUTEZ answers name (routeErr: they could not be had) listed its own.
func tally(pages, routes []*connz.Page, routeErr error) sweep {
	s := sweep{complete: true, conns: map[string][]connRef{}}
	listed := map[string]bool{}
	var notes []string
	for _, p := range pages {
		listed[p.Server] = true
		if len(p.Conns) < p.Total {
			s.complete = false
			notes = append(notes, fmt.Sprintf("server %s listed %d of its %d connections", p.Server, len(p.Conns), p.Total))
		}
		for _, c := range p.Conns {
			if who := attribute(c); who != "" {
				s.conns[who] = append(s.conns[who], connRef{p.Server, c.CID})
			}
		}
	}
	switch {
	case standalone(pages):
	case routeErr != nil:
		s.complete = false
		notes = append(notes, "ROUTEZ: "+routeErr.Error())
	default:
		var missing []string
		for _, p := range routes {
			for _, id := range append([]string{p.Server}, p.Routes...) {
				if !listed[id] && !slices.Contains(missing, id) {
					missing = append(missing, id)
				}
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			s.complete = false
			notes = append(notes, "no connection listing from server "+strings.Join(missing, ", "))
		}
	}
	s.note = strings.Join(notes, "; ")
	return s
}

// principalLiveness answers principalLiveness: live when a connection of p is open, gone
// when a complete sweep found none, unknown otherwise.
func (o *oracle) principalLiveness(ctx context.Context, p string) protocol.PrincipalLivenessResult {
	s := o.sweep(ctx)
	res := protocol.PrincipalLivenessResult{Principal: p, State: protocol.ConnUnknown, SweepComplete: s.complete, Note: s.note}
	switch {
	case len(s.conns[p]) > 0:
		res.State = protocol.ConnLive
	case s.complete:
		res.State = protocol.ConnGone
	default:
		res.Note += "; the sweep is incomplete: nothing is reported gone"
	}
	return res
}

// evict answers evictPrincipal and evictPrincipals: one shared sweep, then up to
// verifyRounds rounds of a KICK of every connection of the principals still listed and a
// sweep that verifies it. VerifiedGone is said of a principal only once a complete sweep
// finds none of its connections; a sweep that is not complete leaves every principal it
// would decide unverified.
func (o *oracle) evict(ctx context.Context, principals []string) []protocol.EvictionResult {
	res := make([]protocol.EvictionResult, len(principals))
	idx := map[string][]int{} // a principal named twice gets the same answer twice
	for i, p := range principals {
		res[i].Principal = p
		idx[p] = append(idx[p], i)
	}
	each := func(p string, f func(r *protocol.EvictionResult)) {
		for _, i := range idx[p] {
			f(&res[i])
		}
	}
	s := o.sweep(ctx)
	if !s.complete {
		for i := range res {
			res[i].Note = "the sweep is incomplete (" + s.note + "): nothing was kicked, nothing is verified gone"
		}
		return res
	}
	pending := map[string][]connRef{}
	for p := range idx {
		if c := s.conns[p]; len(c) > 0 {
			pending[p] = c
		} else {
			each(p, func(r *protocol.EvictionResult) {
				r.ScanComplete, r.VerifiedGone, r.Note = true, true, "no connection of the principal is open"
			})
		}
	}
	ev, err := o.dialEvictor()
	if err != nil {
		for p := range pending {
			each(p, func(r *protocol.EvictionResult) {
				r.ScanComplete, r.Remaining, r.Note = true, len(pending[p]), err.Error()
			})
		}
		pending = nil
	} else {
		defer ev.Close()
	}
	// remain reports what is still pending after sweeps verify sweeps.
	remain := func(sweeps int) {
		for p, c := range pending {
			each(p, func(r *protocol.EvictionResult) {
				r.ScanComplete, r.Remaining = true, len(c)
				r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %d connection(s) still open after %d verify sweeps: is the principal's next connect denied?", len(c), sweeps), "; ")
			})
		}
	}
	for round := 0; len(pending) > 0; round++ {
		if round == verifyRounds {
			remain(round) // each kick was verified by the sweep after it
			break
		}
		kicked, notes := o.kick(ctx, ev, pending)
		for p, n := range kicked {
			each(p, func(r *protocol.EvictionResult) { r.Kicked += n })
		}
		for p, n := range notes {
			each(p, func(r *protocol.EvictionResult) { r.Note = n })
		}
		if !pause(ctx, round) {
			remain(round)
			break
		}
		s = o.sweep(ctx)
		if !s.complete {
			for p := range pending {
				each(p, func(r *protocol.EvictionResult) {
					r.Note = strings.TrimPrefix(r.Note+"; the verify sweep is incomplete ("+s.note+"): nothing is verified gone", "; ")
				})
			}
			break
		}
		for p := range pending {
			if c := s.conns[p]; len(c) > 0 {
				pending[p] = c
				continue
			}
			delete(pending, p)
			each(p, func(r *protocol.EvictionResult) { r.ScanComplete, r.VerifiedGone = true, true })
		}
	}
	for _, r := range res {
		o.r.log.Info("delivery-admin eviction", "principal", r.Principal, "kicked", r.Kicked, "remaining", r.Remaining,
			"verifiedGone", r.VerifiedGone, "scanComplete", r.ScanComplete, "note", r.Note)
	}
	return res
}

// dialEvictor connects with the evict credential, for one eviction.
func (o *oracle) dialEvictor() (*nats.Conn, error) {
	r := o.r
	nc, err := nats.Connect(r.cfg.Server, append(client.TLSOptions(r.cfg.TLSCA), nats.UserJWTAndSeed(o.evictor.JWT, o.evictor.Seed),
		nats.CustomInboxPrefix(o.evictor.InboxPrefix), nats.Name("cotal delivery evictor "+r.space), nats.Timeout(r.opTimeout), nats.NoReconnect())...)
	if err != nil {
		return nil, fmt.Errorf("connect with the evict credential: %w", err)
	}
	return nc, nil
}

// pause waits before verify sweep round+1, longer each round, and reports false when ctx
// ends first. A kicked connection leaves the server's listing as it closes.
func pause(ctx context.Context, round int) bool {
	t := time.NewTimer(time.Duration(round) * 100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// kick closes the connections, at most kicksInFlight at once, and returns how many it
// closed of each principal and, for a principal one of whose kicks failed, the failure.
func (o *oracle) kick(ctx context.Context, ev *nats.Conn, conns map[string][]connRef) (map[string]int, map[string]string) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		kicked = map[string]int{}
		notes  = map[string]string{}
		slots  = make(chan struct{}, kicksInFlight)
	)
	for p, cs := range conns {
		for _, c := range cs {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				kctx, cancel := context.WithTimeout(ctx, o.r.opTimeout)
				closed, err := connz.Kick(kctx, ev, c.server, c.cid)
				cancel()
				mu.Lock()
				defer mu.Unlock()
				if closed {
					kicked[p]++
				}
				if err != nil {
					notes[p] = err.Error()
				}
			}()
		}
	}
	wg.Wait()
	return kicked, notes
}
