package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The delivery ctl rail: cotal.<space>.ctl.delivery.<owner>.<actor>, the reference's
// control envelope {op, args, from} answered with {ok, data} or {ok:false, error}. Only
// that principal may publish there (the broker pins it), so the subject names the caller;
// from.id must agree. The caller's incarnation and read ACL come from the ACL bucket,
// written by whoever minted its credential (CommitACL): the alias's single live row for a
// join, the lifecycle uid named in the args for a leave or a list. A request may also
// carry the caller's user JWT and its key's signature (Cotal-Jwt, Cotal-Sig: a Go
// extension), which names the incarnation and refreshes its row from the credential, or
// a callout member's Cotal-Uid, which names the incarnation.

// ctl serves the delivery rail.
type ctl struct {
	r      *run
	hist   history // readHistory's reader
	queues [ctlWorkers]chan *nats.Msg
}

// ctlWorkers is how many requests of the delivery rail are answered at once. Each waits
// on a few bucket and stream requests to the broker, so answered one at a time, 200
// members closing together (each confirming its position) waited seconds for the last
// answer. The requests of one principal (one rail subject) all go to the same worker, so
// they are answered in the order they arrived, as before.
const ctlWorkers = 16

// ctlQueue is how many requests wait per worker before the rail's subscription waits too.
const ctlQueue = 64

// start runs the workers until ctx ends; dispatch hands them the rail's requests.
func (c *ctl) start(ctx context.Context, wg *sync.WaitGroup) {
	for i := range c.queues {
		q := make(chan *nats.Msg, ctlQueue)
		c.queues[i] = q
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-q:
					c.handle(m)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

// dispatch queues a rail request to its principal's worker; when that worker is behind,
// the subscription waits (its pending messages hold the rest).
func (c *ctl) dispatch(m *nats.Msg) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(m.Subject))
	select {
	case c.queues[h.Sum32()%ctlWorkers] <- m:
	case <-c.r.ctx.Done():
	}
}

// caller is who sent a request: the subject's principal and, when the request named it,
// the incarnation.
type caller struct {
	p   protocol.Principal
	uid string // "" until known
}

// handle answers one request on the delivery rail.
func (c *ctl) handle(m *nats.Msg) {
	r := c.r

	sub, ok := railSender(m.Subject, r.space, protocol.ServiceDelivery)
	if !ok || !protocol.IsReplyTo(m.Subject, m.Reply) {
		r.log.Debug("ctl request ignored", "subject", m.Subject, "reply", m.Reply)
		return
	}
	var req protocol.ControlRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		r.reply(m, nil, fmt.Errorf("request: %w", err))
		return
	}
	if req.From.ID != sub.String() {
		r.reply(m, nil, errors.New(protocol.SenderMismatch))
		return
	}
	if !r.gate.isOpen() {
		r.reply(m, nil, errors.New("delivery: this daemon is not serving this shard (it is re-checking ownership); retry"))
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.opTimeout)
	defer cancel()
	who, err := c.identify(ctx, m, sub)
	if err != nil {
		r.reply(m, nil, err)
		return
	}
	var data any
	switch req.Op {
	case protocol.OpDurableJoin:
		data, err = c.durableJoin(ctx, req.Args, who)
	case protocol.OpDurableLeave:
		data, err = c.durableLeave(ctx, req.Args, who)
	case protocol.OpListMemberships:
		data, err = c.list(ctx, req.Args, who)
	case protocol.OpReadHistory:
		data, err = c.readHistory(ctx, req.Args, who)
	case protocol.OpConfirmPosition:
		data, err = c.confirmPosition(ctx, req.Args, who)
	case protocol.OpJoin:
		data, err = c.legacyJoin(ctx, req.Args, who)
	case protocol.OpLeave:
		data, err = c.legacyLeave(ctx, req.Args, who)
	default:
		err = fmt.Errorf("op %q not supported on the delivery control service", req.Op)
	}
	r.reply(m, data, err)
}

// identify reads what the request's headers say of the caller: a presented credential
// (verified, and its read ACL recorded) or a callout member's uid. Without either, the
// caller's incarnation is found per op.
func (c *ctl) identify(ctx context.Context, m *nats.Msg, p protocol.Principal) (caller, error) {
	r := c.r
	token, sig := m.Header.Get(protocol.HeaderJWT), m.Header.Get(protocol.HeaderSig)
	if token != "" || sig != "" {
		if token == "" || sig == "" {
			return caller{}, fmt.Errorf("%w: the request carries only one of %s and %s", errCredential, protocol.HeaderJWT, protocol.HeaderSig)
		}
		now := time.Now()
		mem, cl, err := r.verify.verify(r.space, token, sig, m.Subject, m.Data, p, now)
		if err != nil {
			return caller{}, err
		}
		if err := commitACL(ctx, r.aclKV, mem.p, mem.uid, cl.allow, cl.iat, now); err != nil {
			return caller{}, err
		}
		r.verify.remember(cl, now)
		return caller{p: p, uid: mem.uid}, nil
	}
	if uid := m.Header.Get(protocol.HeaderUID); uid != "" {
		if !protocol.ValidLifecycleUID(uid) {
			return caller{}, fmt.Errorf("%s %q: want 26 to 32 of a-z 0-9", protocol.HeaderUID, uid)
		}
		return caller{p: p, uid: uid}, nil
	}
	return caller{p: p}, nil
}

// readACL returns the caller's member incarnation and its read ACL row: the row of the
// uid the request named, else the alias's single live row (the reference's aclFor by
// alias). op names the refusals.
func (c *ctl) readACL(ctx context.Context, op string, who caller) (member, *ACL, error) {
	r := c.r
	if err := r.acls.sync(ctx, r.opTimeout); err != nil {
		return member{}, nil, fmt.Errorf("%s: read ACLs: %w", op, err)
	}
	ac := r.acls.snapshot()
	if who.uid != "" {
		m := member(who)
		if a := ac.byMember[m.key()]; a != nil {
			return m, a, nil
		}
		return member{}, nil, &noACLError{op: op, who: m.key()}
	}
	rows := ac.byPrincipal[who.p]
	switch len(rows) {
	case 0:
		return member{}, nil, &noACLError{op: op, who: who.p.String()}
	case 1:
		return rows[0], ac.byMember[rows[0].key()], nil
	}
	keys := make([]string, len(rows))
	for i, m := range rows {
		keys[i] = m.key()
	}
	sort.Strings(keys)
	return member{}, nil, fmt.Errorf("read-ACL alias %q resolves to %d live lifecycle rows (%s)", who.p.String(), len(rows), strings.Join(keys, ", "))
}

// noACLError is readACL's refusal when the caller has no ACL row.
type noACLError struct {
	op  string
	who string // the principal, or the member key the request named
}

func (e *noACLError) Error() string {
	return fmt.Sprintf("%s: no read ACL on record for %s (not provisioned for durable delivery)", e.op, e.who)
}

// decodeArgs decodes a request's args leniently (unknown fields ignored, as the
// reference does) into v.
func decodeArgs(op string, raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: args: %w", op, err)
	}
	return nil
}

// durableJoin is the reference's durableJoin: the caller's read ACL must cover the
// channel; its hand-off durable is made sure of and its membership row written (or kept).
func (c *ctl) durableJoin(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	var a protocol.DurableJoinArgs
	if err := decodeArgs(protocol.OpDurableJoin, raw, &a); err != nil {
		return nil, err
	}
	a.Channel = strings.TrimSpace(a.Channel)
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return nil, fmt.Errorf("durableJoin: channel: %w", err)
	}
	row, err := c.join(ctx, protocol.OpDurableJoin, a.Channel, a.Cursor, who)
	if err != nil {
		return nil, err
	}
	res := protocol.DurableJoinResult{Durable: true, Generation: row.Generation}
	if a.Cursor != nil { // a Go caller, which reads the join cursor back; a reference caller sees its own shape
		res.JoinCursor = &row.JoinCursor
		res.Position = row.Position
		// A Go member reads the channel live from now on and confirms its position: the
		// fan-out defers its copies for the grace (readers).
		if p, err := protocol.ParsePrincipal(row.Owner); err == nil {
			c.r.readers.heard(member{p: p, uid: row.UID}, row.Channel, row.Generation, row.Position)
		}
	}
	return res, nil
}

// legacyJoin is the earlier Go join: the same, answered with a JoinResult.
func (c *ctl) legacyJoin(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	args, err := decodeMembershipArgs(raw)
	if err != nil {
		return nil, err
	}
	row, err := c.join(ctx, protocol.OpJoin, args.Channel, &args.Cursor, who)
	if err != nil {
		return nil, err
	}
	return protocol.JoinResult{Channel: args.Channel, Stream: protocol.StreamDLV(c.r.space), Consumer: protocol.ConsumerDLV(who.p, row.UID),
		JoinCursor: row.JoinCursor, Generation: row.Generation}, nil
}

func decodeMembershipArgs(raw json.RawMessage) (protocol.MembershipArgs, error) {
	var a protocol.MembershipArgs
	if err := decodeArgs(protocol.OpJoin, raw, &a); err != nil {
		return a, err
	}
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return a, fmt.Errorf("args: %w", err)
	}
	return a, nil
}

// join records the caller's durable membership of channel from cursor (CHAT's last
// sequence when nil or later). A row that is already active keeps its join cursor, so a
// member that reconnects loses nothing written while it was away.
func (c *ctl) join(ctx context.Context, op, channel string, cursor *uint64, who caller) (protocol.Membership, error) {
	r := c.r
	mem, acl, err := c.readACL(ctx, op, who)
	if err != nil {
		return protocol.Membership{}, err
	}
	if !acl.Covers(channel) {
		return protocol.Membership{}, fmt.Errorf("channel %q is not within your read ACL [%s]", channel, strings.Join(acl.AllowSubscribe, ", "))
	}
	if _, err := c.ensureDLV(ctx, mem); err != nil {
		return protocol.Membership{}, err
	}
	last, err := r.chatLast(ctx)
	if err != nil {
		return protocol.Membership{}, err
	}
	key := protocol.MembershipKey(channel, mem.p, mem.uid)
	row, rev, err := c.readRow(ctx, key)
	if err != nil {
		return protocol.Membership{}, err
	}
	fresh := row == nil || !row.Active()
	if fresh {
		gen := uint64(1)
		if row != nil {
			gen = row.Generation + 1
		}
		at := last
		if cursor != nil {
			at = min(*cursor, last)
		}
		row = &protocol.Membership{Channel: channel, Owner: mem.p.String(), UID: mem.uid,
			State: protocol.MembershipActive, JoinCursor: at, Generation: gen}
	}
	// The fan-out copies every post after the join cursor, the ones it passed before the
	// row existed included (catch-up): the row is active at once.
	activated := true
	row.Activated = &activated
	var mr memberRow
	owe := false
	if fresh {
		// Noted before the row is written: a fan-out round that sees the row runs its
		// catch-up first (fanout.catchUpSeen).
		if mr, err = decodeMembership(mustJSON(row)); err == nil {
			owe = true
			r.fanout.owe(mr)
		}
	}
	if err := c.writeRow(ctx, key, row, rev); err != nil {
		if owe {
			r.fanout.forgive(mr)
		}
		return protocol.Membership{}, err
	}
	if owe {
		r.fanout.requeue(mr)
	}
	r.log.Info("durable join", "member", mem.key(), "channel", channel, "cursor", row.JoinCursor, "generation", row.Generation)
	return *row, nil
}

// writeRow stores row at key by compare-and-set at rev (create when 0) and applies it to
// the roster.
func (c *ctl) writeRow(ctx context.Context, key string, row *protocol.Membership, rev uint64) error {
	r := c.r
	row.Writer = r.lease.me.Holder // the reference writes the daemon's card id, its principal
	row.UpdatedAt = time.Now().UnixMilli()
	b := mustJSON(row)
	var err error
	if rev == 0 {
		rev, err = r.members.Create(ctx, key, b)
	} else {
		rev, err = r.members.Update(ctx, key, b, rev)
	}
	if err != nil {
		return fmt.Errorf("write membership %s: %w", key, err)
	}
	mr, err := decodeMembership(b)
	if err != nil {
		return err
	}
	r.roster.put(key, mr, rev)
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // rows are strings, numbers and bools
	return b
}

// durableLeave is the reference's durableLeave: the row of the named incarnation is
// tombstoned at CHAT's last sequence, if its generation is current. No ACL is needed.
func (c *ctl) durableLeave(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	var a protocol.DurableLeaveArgs
	if err := decodeArgs(protocol.OpDurableLeave, raw, &a); err != nil {
		return nil, err
	}
	a.Channel = strings.TrimSpace(a.Channel)
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return nil, fmt.Errorf("durableLeave: channel: %w", err)
	}
	if a.Generation == nil {
		return nil, errors.New("durableLeave: args.generation is required (the generation durableJoin or listMemberships returned)")
	}
	if !protocol.ValidLifecycleUID(a.LifecycleUID) {
		return nil, fmt.Errorf("durableLeave: args.lifecycleUid %q: want 26 to 32 of a-z 0-9", a.LifecycleUID)
	}
	if who.uid != "" && who.uid != a.LifecycleUID {
		return nil, fmt.Errorf("durableLeave: args.lifecycleUid %s is not the presented credential's %s", a.LifecycleUID, who.uid)
	}
	left, err := c.leave(ctx, a.Channel, a.Generation, a.Cursor, member{p: who.p, uid: a.LifecycleUID})
	if err != nil {
		return nil, err
	}
	return protocol.DurableLeaveResult{Channel: a.Channel, AlreadyLeft: left == nil}, nil
}

// legacyLeave is the earlier Go leave: the incarnation its credential named, answered
// with the row (or null).
func (c *ctl) legacyLeave(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	args, err := decodeMembershipArgs(raw)
	if err != nil {
		return nil, err
	}
	if who.uid == "" {
		return nil, fmt.Errorf("%w: the request carries no credential (%s and %s headers)", errCredential, protocol.HeaderJWT, protocol.HeaderSig)
	}
	return c.leave(ctx, args.Channel, nil, &args.Cursor, member(who))
}

// leave tombstones mem's row for channel at the leave cursor (CHAT's last sequence, or
// cursor when earlier): posts after it are no longer copied. A nil row means there was no
// active row to leave.
func (c *ctl) leave(ctx context.Context, channel string, gen, cursor *uint64, mem member) (*protocol.Membership, error) {
	r := c.r
	key := protocol.MembershipKey(channel, mem.p, mem.uid)
	row, rev, err := c.readRow(ctx, key)
	if err != nil {
		return nil, err
	}
	if row == nil || !row.Active() {
		return nil, nil // nothing to leave
	}
	if gen != nil && *gen != row.Generation {
		return nil, fmt.Errorf("stale membership write for %s/%s: generation %d < current %d", channel, mem.p, *gen, row.Generation)
	}
	last, err := r.chatLast(ctx)
	if err != nil {
		return nil, err
	}
	at := last
	if cursor != nil {
		at = min(*cursor, last)
	}
	at = max(at, row.JoinCursor)
	row.State = protocol.MembershipLeft
	row.LeaveCursor = &at
	if err := c.writeRow(ctx, key, row, rev); err != nil {
		return nil, err
	}
	r.readers.gone(mem, channel)
	r.log.Info("durable leave", "member", mem.key(), "channel", channel, "cursor", at)
	return row, nil
}

// confirmPosition records what a member was given of a channel (a Go extension): the
// position of its active row of that generation moves up to the one confirmed (never past
// CHAT's last sequence, never down), so the fan-out makes no copy of what the member read
// live. Only the member itself asks, on its own subject; a position it claims wrongly
// costs only its own copies.
func (c *ctl) confirmPosition(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	var a protocol.ConfirmPositionArgs
	if err := decodeArgs(protocol.OpConfirmPosition, raw, &a); err != nil {
		return nil, err
	}
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return nil, fmt.Errorf("confirmPosition: channel: %w", err)
	}
	if !protocol.ValidLifecycleUID(a.LifecycleUID) {
		return nil, fmt.Errorf("confirmPosition: args.lifecycleUid %q: want 26 to 32 of a-z 0-9", a.LifecycleUID)
	}
	if who.uid != "" && who.uid != a.LifecycleUID {
		return nil, fmt.Errorf("confirmPosition: args.lifecycleUid %s is not the presented credential's %s", a.LifecycleUID, who.uid)
	}
	mem := member{p: who.p, uid: a.LifecycleUID}
	if a.Closing {
		// The member stops reading live: its copies are written at once from now on.
		defer c.r.readers.gone(mem, a.Channel)
	}
	type answer struct {
		Position uint64 `json:"position"`
	}
	if at, ok := c.r.readers.known(mem, a.Channel, a.Generation); ok && a.Position <= at {
		// Nothing moved (a keep-alive, or a member closing after its last confirmation):
		// no row to read or write.
		if !a.Closing {
			c.r.readers.heard(mem, a.Channel, a.Generation, at)
		}
		return answer{at}, nil
	}
	key := protocol.MembershipKey(a.Channel, mem.p, mem.uid)
	last := uint64(0) // a CHAT sequence known stored, read only when the position moves
	var werr error
	for i := range 5 { // a concurrent write moved the revision: read again
		// The first try takes the row from the members view, which the write below
		// compares and sets against its revision: a stale one fails and is read again.
		row, rev := c.viewRow(key)
		var err error
		if i > 0 || row == nil || !row.Active() || row.Generation != a.Generation {
			if row, rev, err = c.readRow(ctx, key); err != nil {
				return nil, err
			}
		}
		if row == nil || !row.Active() || row.Generation != a.Generation {
			return nil, fmt.Errorf("confirmPosition: no active membership of %s on %s at generation %d", mem.key(), a.Channel, a.Generation)
		}
		if a.Position > row.Position && last == 0 {
			if last, err = c.r.chatAtLeast(ctx, a.Position); err != nil {
				return nil, err
			}
		}
		at := min(a.Position, last)
		if at <= row.Position {
			if !a.Closing {
				c.r.readers.heard(mem, a.Channel, row.Generation, row.Position)
			}
			return answer{row.Position}, nil
		}
		row.Position = at
		err = c.writeRow(ctx, key, row, rev)
		if err == nil {
			if !a.Closing {
				c.r.readers.heard(mem, a.Channel, row.Generation, at)
			}
			return answer{at}, nil
		}
		werr = err
	}
	return nil, fmt.Errorf("confirmPosition: %w", werr)
}

// list is the reference's listMemberships: the caller's active rows of the named
// incarnation (the presented one's when the args name none), sorted by channel.
func (c *ctl) list(ctx context.Context, raw json.RawMessage, who caller) (any, error) {
	var a protocol.ListMembershipsArgs
	if err := decodeArgs(protocol.OpListMemberships, raw, &a); err != nil {
		return nil, err
	}
	uid := a.LifecycleUID
	if uid == "" {
		uid = who.uid
	}
	if !protocol.ValidLifecycleUID(uid) {
		return nil, fmt.Errorf("listMemberships: args.lifecycleUid %q: want 26 to 32 of a-z 0-9", uid)
	}
	if err := c.r.roster.sync(ctx, c.r.opTimeout); err != nil {
		return nil, fmt.Errorf("listMemberships: %w", err)
	}
	mem := member{p: who.p, uid: uid}
	out := []protocol.MembershipInfo{}
	for _, row := range c.r.roster.snapshot().byMember[mem.key()] {
		if row.Active() {
			out = append(out, protocol.MembershipInfo{Channel: row.Channel, Generation: row.Generation,
				Activated: row.Activated != nil && *row.Activated, Position: row.Position})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Channel < out[j].Channel })
	return protocol.ListMembershipsResult{Memberships: out}, nil
}

// readRow reads one membership row from the bucket (fresh, not from the view).
// viewRow is the membership row the members view holds for key and its revision (nil
// when the view holds none); it may be behind the bucket.
func (c *ctl) viewRow(key string) (*protocol.Membership, uint64) {
	r, rev, ok := c.r.roster.row(key)
	if !ok {
		return nil, 0
	}
	row := r.Membership
	return &row, rev
}

func (c *ctl) readRow(ctx context.Context, key string) (*protocol.Membership, uint64, error) {
	e, err := c.r.members.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read membership %s: %w", key, err)
	}
	row, err := protocol.DecodeMembership(e.Value())
	if err != nil {
		return nil, e.Revision(), nil // unreadable: replaced by a fresh row
	}
	return &row, e.Revision(), nil
}

// ensureDLV creates mem's bind-only hand-off durable unless it exists (a member minted by
// a release before mint made it), and returns its name.
// Its config is the reference's (streams.ts dlvDurableConfig): no max_ack_pending, so the
// server's default (1000, what the earlier release set explicitly) applies; an existing
// durable is used as it is.
func (c *ctl) ensureDLV(ctx context.Context, mem member) (string, error) {
	r := c.r
	name := protocol.ConsumerDLV(mem.p, mem.uid)
	stream := protocol.StreamDLV(r.space)
	_, err := r.js.Consumer(ctx, stream, name)
	if err == nil {
		return name, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", fmt.Errorf("hand-off durable %s: %w", name, err)
	}
	_, err = r.js.CreateConsumer(ctx, stream, provision.HandoffConfig(r.space, mem.p, mem.uid))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return "", fmt.Errorf("create hand-off durable %s: %w", name, err)
	}
	return name, nil
}

// railSender returns the principal whose request subject this is:
// cotal.<space>.ctl.<service>.<owner>.<actor>.
func railSender(subject, space, service string) (protocol.Principal, bool) {
	rest, ok := strings.CutPrefix(subject, protocol.Root+"."+space+".ctl."+service+".")
	if !ok {
		return protocol.Principal{}, false
	}
	p, err := protocol.ParsePrincipal(rest)
	return p, err == nil
}
