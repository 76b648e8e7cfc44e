package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// The liveness oracle (cotal.<space>.ctl.delivery-admin.<owner>.<actor>, op
// planeConnLiveness): is a connection the auth service recorded for a plane claim still
// open? The daemon asks the broker itself, CONNZ scoped to the space's account, one lookup
// per tuple by connection id, which every server answers ($SYS.REQ.SERVER.PING.CONNZ over
// a system connection, $SYS.REQ.ACCOUNT.PING.CONNZ over the account's own import) and the
// server the tuple names decides (a connection id is that server's). A standalone broker
// that is not the named server speaks for it too: the named one is the broker's past run.
// "gone" is said only when every lookup was so answered; a sweep that is not complete
// answers "unknown", which callers treat as "may be live".

// maxSafeInt is the largest integer a JSON number carries exactly (2^53 - 1).
const maxSafeInt = 1<<53 - 1

var userNkeyRE = regexp.MustCompile(`^U[A-Z2-7]{55}$`)

// oracle answers the privileged rail.
type oracle struct {
	r       *run
	nc      *nats.Conn   // asks CONNZ; nil when the oracle cannot sweep
	account string       // with a system connection, the space's account; "" over the import
	note    string       // why nc is nil
	evictor *trust.Creds // may KICK; nil when the daemon cannot close a connection
}

// adminWorkers is how many delivery-admin requests the daemon answers at once, so a slow
// one (an eviction's sweeps and kicks, a listing a server is slow to give) does not hold up
// the requests behind it. The rail is the manager's and the auth service's only.
const adminWorkers = 4

// workers returns a message handler that passes each message to one of n goroutines
// running handle, waiting for a free one, until ctx ends (wg counts them). A message still
// waiting then is dropped: a request's caller reads its timeout as unknown.
func workers(ctx context.Context, wg *sync.WaitGroup, n int, handle nats.MsgHandler) nats.MsgHandler {
	msgs := make(chan *nats.Msg)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-msgs:
					handle(m)
				}
			}
		}()
	}
	return func(m *nats.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	}
}

// handle answers one request on the delivery-admin rail.
func (o *oracle) handle(m *nats.Msg) {
	r := o.r
	if _, ok := railSender(m.Subject, r.space, protocol.ServiceDeliveryAdmin); !ok || !protocol.IsReplyTo(m.Subject, m.Reply) {
		r.log.Debug("admin request ignored", "subject", m.Subject, "reply", m.Reply)
		return
	}
	var req protocol.ControlRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		r.reply(m, nil, fmt.Errorf("request: %w", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 2*r.opTimeout)
	defer cancel()
	switch req.Op {
	case protocol.OpPlaneConnLiveness:
		args, err := decodeLivenessArgs(req.Args)
		if err != nil {
			r.reply(m, nil, err)
			return
		}
		r.reply(m, o.liveness(ctx, args), nil)
	case protocol.OpPrincipalLiveness, protocol.OpEvictPrincipal:
		p, err := decodePrincipalArgs(req.Args)
		if err == nil && req.Op == protocol.OpEvictPrincipal {
			err = o.notSelf(p)
		}
		if err == nil {
			err = o.canSweep(req.Op)
		}
		switch {
		case err != nil:
			r.reply(m, nil, err)
		case req.Op == protocol.OpEvictPrincipal && o.evictor == nil:
			r.reply(m, nil, errNoEvictor(req.Op))
		case req.Op == protocol.OpPrincipalLiveness:
			r.reply(m, o.principalLiveness(ctx, p), nil)
		default:
			r.reply(m, o.evict(ctx, []string{p})[0], nil)
		}
	case protocol.OpEvictPrincipals:
		ps, err := decodePrincipalsArgs(req.Args)
		for _, p := range ps {
			if err == nil {
				err = o.notSelf(p)
			}
		}
		if err == nil {
			err = o.canSweep(req.Op)
		}
		if err == nil && o.evictor == nil {
			err = errNoEvictor(req.Op)
		}
		if err != nil {
			r.reply(m, nil, err)
			return
		}
		r.reply(m, o.evict(ctx, ps), nil)
	default:
		r.reply(m, nil, fmt.Errorf("unknown op %q: want %s, %s, %s or %s", req.Op,
			protocol.OpPlaneConnLiveness, protocol.OpPrincipalLiveness, protocol.OpEvictPrincipal, protocol.OpEvictPrincipals))
	}
}

// decodeLivenessArgs reads the closed object {query: {ledger, records}} (the reference's
// form) or {ledger, records} (earlier Go releases): any other key, a missing tuple or a
// malformed one is refused.
func decodeLivenessArgs(raw json.RawMessage) (protocol.LivenessArgs, error) {
	var q struct {
		Query json.RawMessage `json:"query"`
	}
	if json.Unmarshal(raw, &q) == nil && q.Query != nil {
		if err := strictjson.Decode(raw, &q); err != nil {
			return protocol.LivenessArgs{}, fmt.Errorf("args: %w", err)
		}
		raw = q.Query
	}
	var a struct {
		Ledger  *protocol.ConnTuple `json:"ledger"`
		Records *protocol.ConnTuple `json:"records"`
	}
	if err := strictjson.Decode(raw, &a); err != nil {
		return protocol.LivenessArgs{}, fmt.Errorf("args: %w", err)
	}
	if a.Ledger == nil || a.Records == nil {
		return protocol.LivenessArgs{}, errors.New("args: want exactly {query: {ledger, records}}")
	}
	for name, t := range map[string]*protocol.ConnTuple{"ledger": a.Ledger, "records": a.Records} {
		switch {
		case len(t.ServerID) == 0 || len(t.ServerID) > 128:
			return protocol.LivenessArgs{}, fmt.Errorf("args: %s.serverId: want 1 to 128 characters", name)
		case t.CID == 0 || t.CID > maxSafeInt:
			return protocol.LivenessArgs{}, fmt.Errorf("args: %s.cid: want a positive safe integer", name)
		case !userNkeyRE.MatchString(t.UserNkey):
			return protocol.LivenessArgs{}, fmt.Errorf("args: %s.userNkey: want a user nkey (U and 55 base32 letters)", name)
		}
	}
	return protocol.LivenessArgs{Ledger: *a.Ledger, Records: *a.Records}, nil
}

// lookup is what one CONNZ lookup by connection id found.
type lookup struct {
	answered bool   // the broker answered the lookup completely
	server   string // the answering server's id
	found    bool   // an open connection with the id exists in the space's account
	user     string // its authenticated user nkey
	err      string // why it was not answered
	note     string // how an answer was reached, said in the result
}

// liveness looks both tuples up and decides.
func (o *oracle) liveness(ctx context.Context, a protocol.LivenessArgs) protocol.LivenessResult {
	if o.nc == nil {
		return decide(a, lookup{err: o.note}, lookup{err: o.note})
	}
	ledger := o.lookup(ctx, a.Ledger)
	records := ledger
	if a.Records.CID != a.Ledger.CID || a.Records.ServerID != a.Ledger.ServerID {
		records = o.lookup(ctx, a.Records)
	}
	return decide(a, ledger, records)
}

// lookup asks the server t names for its open connection t.CID of the space's account.
func (o *oracle) lookup(ctx context.Context, t protocol.ConnTuple) lookup {
	req := struct {
		Account string `json:"acc,omitempty"`
		CID     uint64 `json:"cid"`
		Auth    bool   `json:"auth"`
		State   int    `json:"state"` // open connections
	}{Account: o.account, CID: t.CID, Auth: true}
	subject := "$SYS.REQ.ACCOUNT.PING.CONNZ"
	if o.account != "" {
		subject = "$SYS.REQ.SERVER.PING.CONNZ"
	}
	pages, err := connz.Ask(ctx, o.nc, subject, req, func(pages []*connz.Page) bool {
		return pages[len(pages)-1].Server == t.ServerID
	})
	if err != nil {
		return lookup{err: "CONNZ: " + err.Error()}
	}
	i := slices.IndexFunc(pages, func(p *connz.Page) bool { return p.Server == t.ServerID })
	if i < 0 {
		if len(pages) == 1 && pages[0].Cluster == "" {
			// One standalone server answers for the space, and it is not the named one:
			// that server process no longer runs (a restart takes a new server id), so
			// neither does any of its connections.
			return lookup{answered: true, server: t.ServerID,
				note: fmt.Sprintf("server %s no longer runs: the broker is the standalone server %s", t.ServerID, pages[0].Server)}
		}
		return lookup{answered: true, server: pages[0].Server} // another server's answer: unknown
	}
	page := pages[i]
	l := lookup{answered: true, server: page.Server}
	for _, c := range page.Conns {
		if c.CID == t.CID {
			l.found, l.user = true, c.User
		}
	}
	return l
}

// decide turns the lookups into the answer. The sweep is complete when both lookups were
// answered; a tuple is live when its connection is open with its user, gone when the
// server it names answered a complete sweep without it, and unknown otherwise (another
// server, a different user on that id, or an incomplete sweep).
func decide(a protocol.LivenessArgs, ledger, records lookup) protocol.LivenessResult {
	res := protocol.LivenessResult{SweepComplete: ledger.answered && records.answered}
	var notes []string
	one := func(t protocol.ConnTuple, l lookup) protocol.TupleState {
		st := protocol.TupleState{Tuple: t, State: protocol.ConnUnknown}
		if l.note != "" {
			notes = append(notes, l.note)
		}
		switch {
		case !l.answered:
			notes = append(notes, l.err)
		case l.server != t.ServerID:
			notes = append(notes, fmt.Sprintf("connection %d names server %s; the broker that answered is %s", t.CID, t.ServerID, l.server))
		case l.found && l.user == t.UserNkey:
			st.State = protocol.ConnLive
		case l.found:
			notes = append(notes, fmt.Sprintf("connection %d is open under another user", t.CID))
		case res.SweepComplete:
			st.State = protocol.ConnGone
		}
		return st
	}
	res.Ledger = one(a.Ledger, ledger)
	res.Records = one(a.Records, records)
	if !res.SweepComplete {
		notes = append(notes, "the sweep is incomplete: nothing is reported gone")
	}
	if len(notes) > 0 {
		seen := map[string]bool{}
		for _, n := range notes {
			if !seen[n] {
				seen[n] = true
				if res.Note != "" {
					res.Note += "; "
				}
				res.Note += n
			}
		}
	}
	return res
}

// probe answers the plain liveness probe cotal.<space>.live.delivery.<owner>.<actor>.
func (r *run) probe(m *nats.Msg) {
	if !protocol.IsReplyTo(m.Subject, m.Reply) {
		return
	}
	st := protocol.ResponderUnbound
	if r.gate.isOpen() {
		st = protocol.ResponderBound
	}
	b, _ := json.Marshal(protocol.PlaneProbe{Plane: protocol.PlaneDelivery, Responder: st, Instance: r.instance})
	if err := r.nc.Publish(m.Reply, b); err != nil {
		r.log.Debug("probe reply", "err", err)
	}
}
