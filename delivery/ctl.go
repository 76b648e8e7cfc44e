package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// The delivery ctl rail: cotal.<space>.ctl.delivery.<owner>.<actor>. Only that principal
// may publish there (the broker pins it), and each request carries the requester's user JWT
// and its user key's signature over the request, so the daemon learns the member's
// incarnation and read ACL from what the space's account signed, never from the payload.

// ctl serves the delivery rail.
type ctl struct {
	r *run
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
	if !r.gate.isOpen() {
		r.reply(m, nil, errors.New("the delivery daemon is not serving right now (it is re-checking its lease); try again shortly"))
		return
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(r.ctx, r.opTimeout)
	defer cancel()
	var mem member
	var acl ACL
	var err error
	if uid := m.Header.Get(protocol.HeaderUID); uid != "" && m.Header.Get(protocol.HeaderJWT) == "" {
		mem, acl, err = granted(ctx, r.aclKV, sub, uid, now)
	} else {
		mem, acl, err = r.verify.verify(m.Header.Get(protocol.HeaderJWT), m.Header.Get(protocol.HeaderSig), m.Subject, m.Data, sub, now)
	}
	if err != nil {
		r.reply(m, nil, err)
		return
	}
	var data any
	switch req.Op {
	case protocol.OpJoin:
		data, err = c.join(ctx, req.Args, mem, acl)
	case protocol.OpLeave:
		data, err = c.leave(ctx, req.Args, mem)
	case protocol.OpListMemberships:
		data = c.list(mem)
	default:
		err = fmt.Errorf("unknown op %q: want %s, %s or %s", req.Op, protocol.OpJoin, protocol.OpLeave, protocol.OpListMemberships)
	}
	r.reply(m, data, err)
}

func decodeMembershipArgs(raw json.RawMessage) (protocol.MembershipArgs, error) {
	var a protocol.MembershipArgs
	if err := strictjson.Decode(raw, &a); err != nil {
		return a, fmt.Errorf("args: %w", err)
	}
	if err := protocol.CheckChannelPattern(a.Channel); err != nil {
		return a, fmt.Errorf("args: %w", err)
	}
	return a, nil
}

// join records mem's ACL, makes sure its hand-off durable exists, and writes (or keeps) its
// membership row for the channel. A row that is already active keeps its join cursor, so
// a member that reconnects loses nothing written while it was away.
func (c *ctl) join(ctx context.Context, raw json.RawMessage, mem member, acl ACL) (any, error) {
	r := c.r
	args, err := decodeMembershipArgs(raw)
	if err != nil {
		return nil, err
	}
	if !acl.Covers(protocol.ChannelFilter(r.space, args.Channel)) {
		return nil, fmt.Errorf("channel %s is outside the read ACL of %s's credential", args.Channel, mem.p)
	}
	if err := c.recordACL(ctx, mem, acl); err != nil {
		return nil, err
	}
	consumer, err := c.ensureDLV(ctx, mem)
	if err != nil {
		return nil, err
	}
	last, err := r.chatLast(ctx)
	if err != nil {
		return nil, err
	}
	key := protocol.MembershipKey(args.Channel, mem.p, mem.uid)
	row, rev, err := c.readRow(ctx, key)
	if err != nil {
		return nil, err
	}
	fresh := row == nil || !row.Active()
	if fresh {
		gen := uint64(1)
		if row != nil {
			gen = row.Generation + 1
		}
		row = &protocol.Membership{Channel: args.Channel, Principal: mem.p.String(), UID: mem.uid,
			State: protocol.MembershipActive, JoinCursor: min(args.Cursor, last), Generation: gen}
	}
	row.Writer = r.instance
	row.UpdatedAt = time.Now().UnixMilli()
	b, _ := json.Marshal(row)
	if rev == 0 {
		rev, err = r.members.Create(ctx, key, b)
	} else {
		rev, err = r.members.Update(ctx, key, b, rev)
	}
	if err != nil {
		return nil, fmt.Errorf("write membership %s: %w", key, err)
	}
	mr, err := decodeMembership(b)
	if err != nil {
		return nil, err
	}
	r.roster.put(key, mr, rev)
	if fresh {
		r.fanout.requeue(mr)
	}
	r.log.Info("durable join", "member", mem.key(), "channel", args.Channel, "cursor", row.JoinCursor, "generation", row.Generation)
	return protocol.JoinResult{Channel: args.Channel, Stream: protocol.StreamDLV(r.space), Consumer: consumer,
		JoinCursor: row.JoinCursor, Generation: row.Generation}, nil
}

// leave tombstones mem's row at the leave cursor: posts after it are no longer copied.
func (c *ctl) leave(ctx context.Context, raw json.RawMessage, mem member) (any, error) {
	r := c.r
	args, err := decodeMembershipArgs(raw)
	if err != nil {
		return nil, err
	}
	key := protocol.MembershipKey(args.Channel, mem.p, mem.uid)
	row, rev, err := c.readRow(ctx, key)
	if err != nil {
		return nil, err
	}
	if row == nil || !row.Active() {
		return row, nil // nothing to leave
	}
	last, err := r.chatLast(ctx)
	if err != nil {
		return nil, err
	}
	row.State = protocol.MembershipLeft
	row.LeaveCursor = max(min(args.Cursor, last), row.JoinCursor)
	row.Writer = r.instance
	row.UpdatedAt = time.Now().UnixMilli()
	b, _ := json.Marshal(row)
	rev, err = r.members.Update(ctx, key, b, rev)
	if err != nil {
		return nil, fmt.Errorf("write membership %s: %w", key, err)
	}
	mr, err := decodeMembership(b)
	if err != nil {
		return nil, err
	}
	r.roster.put(key, mr, rev)
	r.log.Info("durable leave", "member", mem.key(), "channel", args.Channel, "cursor", row.LeaveCursor)
	return row, nil
}

// list returns every row of mem's principal, sorted by channel.
func (c *ctl) list(mem member) []protocol.Membership {
	ro := c.r.roster.snapshot()
	out := []protocol.Membership{}
	for _, rows := range ro.byMember {
		for _, row := range rows {
			if row.m.p == mem.p {
				out = append(out, row.Membership)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Channel != out[j].Channel {
			return out[i].Channel < out[j].Channel
		}
		return out[i].UID < out[j].UID
	})
	return out
}

// readRow reads one membership row from the bucket (fresh, not from the view).
func (c *ctl) readRow(ctx context.Context, key string) (*protocol.Membership, uint64, error) {
	e, err := c.r.members.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read membership %s: %w", key, err)
	}
	var row protocol.Membership
	if err := json.Unmarshal(e.Value(), &row); err != nil {
		return nil, e.Revision(), nil // unreadable: replaced by a fresh row
	}
	return &row, e.Revision(), nil
}

// recordACL stores the ACL of mem's credential, unless the bucket already holds one from a
// credential issued later (a member cannot roll its ACL back with an older credential).
func (c *ctl) recordACL(ctx context.Context, mem member, acl ACL) error {
	r := c.r
	key := mem.key()
	e, err := r.aclKV.Get(ctx, key)
	var rev uint64
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read ACL %s: %w", key, err)
	default:
		rev = e.Revision()
		if old, derr := decodeACL(e.Value()); derr == nil && old.IssuedAt > acl.IssuedAt {
			return fmt.Errorf("%w: a credential of %s issued later was presented before; present that one", errCredential, mem.p)
		}
	}
	b, _ := json.Marshal(acl)
	if rev == 0 {
		rev, err = r.aclKV.Create(ctx, key, b)
	} else {
		rev, err = r.aclKV.Update(ctx, key, b, rev)
	}
	if err != nil {
		return fmt.Errorf("write ACL %s: %w", key, err)
	}
	a := acl
	r.acls.put(key, &a, rev)
	return nil
}

// ensureDLV creates mem's bind-only hand-off durable unless it exists, and returns its name.
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
	_, err = r.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: protocol.DLVSubject(r.space, mem.p, mem.uid),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       provision.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 1000,
	})
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
