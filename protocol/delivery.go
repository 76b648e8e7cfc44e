package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Names and wire shapes of the durable plane: the delivery daemon that backs durable
// channels with a per-member hand-off, its control rails and its lease.

// Control services answered on cotal.<space>.ctl.<service>.<owner>.<actor>.
const (
	ServiceDelivery      = "delivery"       // durable join, leave and list, for any member
	ServiceDeliveryAdmin = "delivery-admin" // the privileged rail: liveness oracles
)

// ReplyToken is the token between a request subject and its nonce in a reply subject:
// <request subject>.reply.<nonce>. A credential reads only the replies under its own
// request subjects, and a daemon answers only there, so neither needs a general inbox.
const ReplyToken = "reply"

// StreamDLV names the stream of per-member durable hand-offs.
func StreamDLV(space string) string { return "DLV_" + space }

// DLVSubject is the hand-off subject of one member incarnation:
// cotal.<space>.dlv.<owner>.<actor>.<uid>.
func DLVSubject(space string, p Principal, uid string) string {
	return Root + "." + space + ".dlv." + p.Owner + "." + p.Actor + "." + uid
}

// DLVAll selects every hand-off subject of a space.
func DLVAll(space string) string { return Root + "." + space + ".dlv.>" }

// ConsumerDLV names a member incarnation's bind-only hand-off durable: dlv_<owner>-<actor>-<uid>.
func ConsumerDLV(p Principal, uid string) string { return "dlv_" + p.Dash() + "-" + uid }

// ConsumerDLVPrefix is the name prefix shared by every hand-off durable of one principal.
func ConsumerDLVPrefix(p Principal) string { return "dlv_" + p.Dash() + "-" }

// StreamInbox names the reference's mixed inbox stream INBOX_<space>: its fan-out writes
// one entry per member copy there, and its trusted reader moves each to DLV.
func StreamInbox(space string) string { return "INBOX_" + space }

// DinboxSubject is the mixed inbox subject of one member incarnation:
// cotal.<space>.dinbox.<owner>.<actor>.<uid>.
func DinboxSubject(space string, p Principal, uid string) string {
	return Root + "." + space + ".dinbox." + p.Owner + "." + p.Actor + "." + uid
}

// DinboxAll selects every mixed inbox subject of a space.
func DinboxAll(space string) string { return Root + "." + space + ".dinbox.>" }

// ParseDinbox reads the member incarnation a mixed inbox subject of space names. Only
// the full six-token form is one; anything else is refused.
func ParseDinbox(space, subject string) (Principal, string, error) {
	rest, ok := strings.CutPrefix(subject, Root+"."+space+".dinbox.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 {
		return Principal{}, "", fmt.Errorf("mixed inbox subject %q: want %s.%s.dinbox.<owner>.<actor>.<uid>", subject, Root, space)
	}
	p := Principal{Owner: parts[0], Actor: parts[1]}
	if err := p.Validate(); err != nil {
		return Principal{}, "", fmt.Errorf("mixed inbox subject %q: %w", subject, err)
	}
	if !ValidLifecycleUID(parts[2]) {
		return Principal{}, "", fmt.Errorf("mixed inbox subject %q: lifecycle uid %q is not 26 to 32 of a-z 0-9", subject, parts[2])
	}
	return p, parts[2], nil
}

// InboxEntry is one entry of the mixed inbox (the reference's Plane3Entry, written by its
// fan-out's publishDinbox): the post, the channel and CHAT sequence it was read at, why
// it was copied, and the membership generation (0 for a mention).
type InboxEntry struct {
	Msg        json.RawMessage `json:"msg"`
	Channel    string          `json:"channel"`
	Seq        uint64          `json:"seq"`
	Reason     string          `json:"reason"`
	Generation uint64          `json:"generation"`
}

// ConsumerReader names the durable over INBOX_<space> that moves entries to DLV (the
// reference's INBOX_READER_DURABLE).
const ConsumerReader = "reader"

// ConsumerFanout names the delivery daemon's durable over CHAT.
const ConsumerFanout = "fanout"

// ConsumerCatchup names the daemon's transient reader that copies a new member's
// activation window.
const ConsumerCatchup = "dlvcatchup"

// ConsumerHistoryRead names the daemon's transient reader that serves readHistory: one
// fixed name, so the delivery credential reads CHAT through three named consumers and no
// other.
const ConsumerHistoryRead = "dlvhistory"

// BucketDelivery names the delivery lease KV bucket.
func BucketDelivery(space string) string { return "cotal_delivery_" + space }

// BucketMembers names the durable membership KV bucket.
func BucketMembers(space string) string { return "cotal_members_" + space }

// BucketACL names the read-ACL KV bucket of members with a durable hand-off.
func BucketACL(space string) string { return "cotal_acl_" + space }

// LeaseKey is the delivery lease's key: one daemon per space, shard 0.
const LeaseKey = "lease.0"

// CtlSubject is where sender asks a control service: cotal.<space>.ctl.<service>.<o>.<a>.
func CtlSubject(space, service string, sender Principal) string {
	return Root + "." + space + ".ctl." + service + "." + sender.Owner + "." + sender.Actor
}

// CtlFilter selects every request to a control service of a space.
func CtlFilter(space, service string) string {
	return Root + "." + space + ".ctl." + service + ".*.*"
}

// ReplyFilter selects every reply to requests on subject (which may hold wildcards).
func ReplyFilter(subject string) string { return subject + "." + ReplyToken + ".*" }

// IsReplyTo reports whether reply is a reply subject of request: <request>.reply.<nonce>
// with one concrete nonce token.
func IsReplyTo(request, reply string) bool {
	nonce, ok := strings.CutPrefix(reply, request+"."+ReplyToken+".")
	return ok && ValidToken(nonce)
}

// MemberKey is the key of one member incarnation: <owner>.<actor>.<uid>.
func MemberKey(p Principal, uid string) string { return p.String() + "." + uid }

// MembershipKey is the members-bucket key of a member's row for channel:
// <channel>/<owner>.<actor>.<uid>. KV keys cannot hold * or >, so a pattern segment "*"
// is written "=" and a final ">" is written "==" (channel tokens never hold "=").
func MembershipKey(channel string, p Principal, uid string) string {
	segs := strings.Split(channel, ".")
	for i, s := range segs {
		switch s {
		case "*":
			segs[i] = "="
		case ">":
			segs[i] = "=="
		}
	}
	return strings.Join(segs, ".") + "/" + MemberKey(p, uid)
}

// Headers of a hand-off frame on a DLV subject. Only the delivery daemon may publish
// there, so a receiver trusts them. The reference's frame (endpoint.ts readerHandle /
// pumpDlv) carries HeaderDeliveryFrame "1" and a DeliveryFrame body; Go's daemon adds
// HeaderSeq and HeaderReason, which the reference ignores. HeaderFrame and HeaderSubject
// are the frame of earlier Go releases (the post's envelope, unchanged, as the body):
// still read, so copies stored before an upgrade are not lost, never written.
const (
	HeaderDeliveryFrame = "Cotal-Delivery-Frame" // frame version, "1"
	HeaderFrame         = "Cotal-Frame"          // earlier Go frame: version, "1"
	HeaderSubject       = "Cotal-Subject"        // earlier Go frame: the chat subject of the post
	HeaderSeq           = "Cotal-Seq"            // the post's CHAT stream sequence (Go extension)
	HeaderReason        = "Cotal-Reason"         // why the copy was made: a Handoff* value (Go extension)
	HeaderJWT           = "Cotal-Jwt"            // control request: the requester's user JWT (Go extension)
	HeaderSig           = "Cotal-Sig"            // control request: its user key's signature, base64url
	HeaderUID           = "Cotal-Uid"            // control request of a callout-admitted member: its lifecycle uid
)

// FrameVersion is the hand-off frame version this package writes.
const FrameVersion = "1"

// DeliveryFrame is the body of a hand-off frame: the channel the post was published on
// and the post, authenticated for it (AuthenticateChannelMessage). Keys are written in
// this order, as the reference writes them.
type DeliveryFrame struct {
	Version int             `json:"version"`
	Channel string          `json:"channel"`
	Msg     json.RawMessage `json:"msg"`
}

// DLVMsgID is the Nats-Msg-Id of a hand-off copy: <msgId>:<owner>.<actor>:<uid>:<generation>
// (the reference's form: the lifecycle uid is its own field, so a successor incarnation
// of the same alias is not deduplicated away).
func DLVMsgID(id string, p Principal, uid string, gen uint64) string {
	return id + ":" + p.String() + ":" + uid + ":" + strconv.FormatUint(gen, 10)
}

// AuthenticateChannelMessage returns envelope as delivered on channel: its channel field
// set to channel (the one the chat subject names) and any to/toService removed. Unknown
// fields are kept.
func AuthenticateChannelMessage(envelope []byte, channel string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(envelope, &m); err != nil {
		return nil, fmt.Errorf("authenticate message: %w", err)
	}
	if m == nil {
		return nil, errors.New("authenticate message: not an object")
	}
	ch, _ := json.Marshal(channel)
	m["channel"] = ch
	delete(m, "to")
	delete(m, "toService")
	return json.Marshal(m)
}

// EncodeDeliveryFrame returns the frame body of a copy of envelope, posted on channel.
func EncodeDeliveryFrame(channel string, envelope []byte) ([]byte, error) {
	msg, err := AuthenticateChannelMessage(envelope, channel)
	if err != nil {
		return nil, err
	}
	return json.Marshal(DeliveryFrame{Version: 1, Channel: channel, Msg: msg})
}

// Handoff is one hand-off copy as a receiver reads it.
type Handoff struct {
	Subject string // the chat subject the post was published on
	Data    []byte // the post's envelope
	Seq     uint64 // its CHAT sequence; 0 when the frame does not say (a reference frame)
	Reason  string // why it was copied; "" when the frame does not say
}

// DecodeHandoff reads a hand-off copy of space from its headers (header returns one
// header's value) and body: the reference's frame (HeaderDeliveryFrame "1", a
// DeliveryFrame body of version 1 whose channel is concrete and equals msg.channel) or
// the earlier Go frame (HeaderFrame "1", HeaderSubject, the envelope as the body).
// Unknown keys are ignored. The returned subject is rebuilt from the frame's channel and
// the message's from.id; the receive checks still run on it.
func DecodeHandoff(space string, header func(string) string, data []byte) (Handoff, error) {
	seq, _ := strconv.ParseUint(header(HeaderSeq), 10, 64)
	h := Handoff{Seq: seq, Reason: header(HeaderReason)}
	if v := header(HeaderDeliveryFrame); v != "" {
		if v != FrameVersion {
			return h, fmt.Errorf("hand-off frame: %s %q: want %q", HeaderDeliveryFrame, v, FrameVersion)
		}
		var f DeliveryFrame
		if err := json.Unmarshal(data, &f); err != nil {
			return h, fmt.Errorf("hand-off frame: %w", err)
		}
		if f.Version != 1 {
			return h, fmt.Errorf("hand-off frame: version %d: want 1", f.Version)
		}
		if err := CheckConcreteChannel(f.Channel); err != nil {
			return h, fmt.Errorf("hand-off frame: channel: %w", err)
		}
		var head struct {
			Channel string `json:"channel"`
			From    struct {
				ID string `json:"id"`
			} `json:"from"`
		}
		if err := json.Unmarshal(f.Msg, &head); err != nil {
			return h, fmt.Errorf("hand-off frame: msg: %w", err)
		}
		if head.Channel != f.Channel {
			return h, fmt.Errorf("hand-off frame: msg.channel %q is not the frame's channel %q", head.Channel, f.Channel)
		}
		sender, err := ParsePrincipal(head.From.ID)
		if err != nil {
			return h, fmt.Errorf("hand-off frame: msg.from.id: %w", err)
		}
		h.Subject, h.Data = ChatSubject(space, sender, f.Channel), f.Msg
		return h, nil
	}
	if v := header(HeaderFrame); v != FrameVersion {
		return h, fmt.Errorf("hand-off frame: no %s header", HeaderDeliveryFrame)
	}
	h.Subject, h.Data = header(HeaderSubject), data
	return h, nil
}

// Why a hand-off copy was made.
const (
	HandoffDurableChannel = "durable-channel"
	HandoffLiveMention    = "live-mention"
	// HandoffMention is a copy of a post on a durable channel for a mentioned agent that
	// is not a member of it and may read it (Go extension).
	HandoffMention = "mention"
	// HandoffMentionNotice is a mention notice (EncodeMentionNotice) for a mentioned agent
	// that may not read the channel: who, where and the id, without the text (Go extension).
	HandoffMentionNotice = "mention-notice"
)

// IsMentionHandoff reports whether reason names a copy made because its post mentions the
// member, rather than because it is a member of the channel.
func IsMentionHandoff(reason string) bool {
	return reason == HandoffLiveMention || reason == HandoffMention || reason == HandoffMentionNotice
}

// Control operations of the delivery rail (the reference's handleDeliveryControl) and of
// the delivery-admin rail.
const (
	OpDurableJoin       = "durableJoin"
	OpDurableLeave      = "durableLeave"
	OpListMemberships   = "listMemberships"
	OpPlaneConnLiveness = "planeConnLiveness"
	OpPrincipalLiveness = "principalLiveness" // delivery-admin: PrincipalArgs, PrincipalLivenessResult
	OpEvictPrincipal    = "evictPrincipal"    // delivery-admin: PrincipalArgs, EvictionResult
	OpEvictPrincipals   = "evictPrincipals"   // delivery-admin: PrincipalsArgs, []EvictionResult
	OpReadHistory       = "readHistory"
	// OpConfirmPosition is a Go extension: a member confirms what it was given of a
	// channel (ConfirmPositionArgs). A reference daemon refuses it as unsupported.
	OpConfirmPosition = "confirmPosition"
	// OpJoin and OpLeave are the durable join and leave of earlier Go releases (args
	// MembershipArgs, replies JoinResult and Membership); still answered, never sent.
	OpJoin  = "join"
	OpLeave = "leave"
)

// SenderMismatch is the refusal of a request whose from.id is not the principal of its
// subject (the reference's wording).
const SenderMismatch = "sender mismatch - request rejected"

// DurableJoinArgs are the args of durableJoin. Cursor is a Go extension (the reference
// ignores it): the CHAT stream's last sequence when the client subscribed live, so the
// daemon copies every post after it; without it the join starts at CHAT's last sequence
// when the daemon takes it. Channel may be a pattern on a Go daemon (a Go extension); the
// reference takes a concrete channel only.
type DurableJoinArgs struct {
	Channel string  `json:"channel"`
	Cursor  *uint64 `json:"cursor,omitempty"`
}

// DurableJoinResult is the data of a durableJoin answer.
type DurableJoinResult struct {
	Durable    bool   `json:"durable"`
	Reason     string `json:"reason,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
	// JoinCursor is a Go extension, answered to a request that sent a Cursor: the CHAT
	// sequence after which every post of the channel arrives as a hand-off copy. A
	// reference daemon leaves it out.
	JoinCursor *uint64 `json:"joinCursor,omitempty"`
	// Position is a Go extension answered with JoinCursor: the membership's confirmed
	// position (Membership.Position).
	Position uint64 `json:"position,omitempty"`
}

// ConfirmPositionArgs are the args of confirmPosition: the member incarnation, the
// channel of its membership row, the row's generation and the CHAT sequence up to which
// it was given every post of the channel.
type ConfirmPositionArgs struct {
	Channel      string `json:"channel"`
	Generation   uint64 `json:"generation"`
	LifecycleUID string `json:"lifecycleUid"`
	Position     uint64 `json:"position"`
	// Closing says the member stops reading the channel live (its endpoint closes): the
	// daemon writes its copies at once from then on instead of deferring them.
	Closing bool `json:"closing,omitempty"`
}

// DurableLeaveArgs are the args of durableLeave: the channel, the membership's generation
// (a stale one is refused) and the lifecycle uid of the incarnation leaving. Cursor is a
// Go extension, as in DurableJoinArgs.
type DurableLeaveArgs struct {
	Channel      string  `json:"channel"`
	Generation   *uint64 `json:"generation"`
	LifecycleUID string  `json:"lifecycleUid"`
	Cursor       *uint64 `json:"cursor,omitempty"`
}

// DurableLeaveResult is the data of a durableLeave answer; AlreadyLeft when no active row
// was found.
type DurableLeaveResult struct {
	Channel     string `json:"channel"`
	AlreadyLeft bool   `json:"alreadyLeft,omitempty"`
}

// ListMembershipsArgs are the args of listMemberships.
type ListMembershipsArgs struct {
	LifecycleUID string `json:"lifecycleUid"`
}

// MembershipInfo is one active membership in a listMemberships answer.
type MembershipInfo struct {
	Channel    string `json:"channel"`
	Generation uint64 `json:"generation"`
	Activated  bool   `json:"activated"`
	// Position is a Go extension: the row's confirmed position (Membership.Position).
	Position uint64 `json:"position,omitempty"`
}

// ListMembershipsResult is the data of a listMemberships answer.
type ListMembershipsResult struct {
	Memberships []MembershipInfo `json:"memberships"`
}

// Limits of readHistory (the reference's READ_HISTORY_DEFAULT_LIMIT and
// READ_HISTORY_MAX_LIMIT): a request without a limit gets ReadHistoryDefaultLimit posts,
// a larger limit is clamped to ReadHistoryMaxLimit.
const (
	ReadHistoryDefaultLimit = 100
	ReadHistoryMaxLimit     = 200
)

// ReadHistoryArgs are the args of readHistory: a concrete channel and, optionally, how
// many of its newest posts to read (a positive integer; omitted means
// ReadHistoryDefaultLimit).
type ReadHistoryArgs struct {
	Channel string `json:"channel"`
	Limit   *int   `json:"limit,omitempty"`
}

// ReadHistoryResult is the data of a readHistory answer (the reference's HistoryPage):
// the channel's newest posts, oldest first, each authenticated for the channel
// (AuthenticateChannelMessage); Complete when nothing older is retained on the stream.
type ReadHistoryResult struct {
	Items    []json.RawMessage `json:"items"`
	Complete bool              `json:"complete"`
}

// ControlRequest is the body of a request on a ctl rail: {op, args, from}.
type ControlRequest struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	From EndpointRef     `json:"from"`
}

// ControlReply is the body of a ctl rail's answer: {ok:true, data} or {ok:false, error}.
type ControlReply struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
}

// MembershipArgs are the args of the earlier Go join and leave (OpJoin, OpLeave): the
// channel (a pattern may hold * and a final >) and the cursor, the CHAT stream's last
// sequence when the client subscribed live (join) or unsubscribed (leave).
type MembershipArgs struct {
	Channel string `json:"channel"`
	Cursor  uint64 `json:"cursor"`
}

// Membership states (the reference's MembershipRecord.state).
const (
	MembershipActive = "durable-active" // joined: posts after the join cursor are the member's
	MembershipLeft   = "live-confirmed" // tombstoned (with a leave cursor): posts after it are not
	// MembershipLeftGo is the tombstone state earlier Go releases wrote; read as
	// MembershipLeft.
	MembershipLeftGo = "left"
)

// Membership is one durable membership row (the reference's MembershipRecord, members.ts):
// key <channel>/<owner>.<actor>.<uid> in cotal_members_<space>. A post at CHAT sequence s
// on a channel the row's pattern matches is the member's when JoinCursor < s and, once the
// member left (LeaveCursor set), s <= *LeaveCursor. Owner holds the principal's dot-form
// (the reference's field name). Read it with DecodeMembership, which also reads the rows
// earlier Go releases wrote.
type Membership struct {
	Channel     string  `json:"channel"`
	Owner       string  `json:"owner"`
	UID         string  `json:"lifecycleUid"`
	State       string  `json:"state"`
	JoinCursor  uint64  `json:"joinCursor"`
	Activated   *bool   `json:"activated,omitempty"`
	LeaveCursor *uint64 `json:"leaveCursor,omitempty"` // set on a tombstone
	Generation  uint64  `json:"generation"`
	Writer      string  `json:"writerIdentity"`
	UpdatedAt   int64   `json:"updatedAt"` // unix ms
	// Position is a Go extension (the reference ignores it, and its writes keep it): the
	// member confirmed it was given every post of the row's window up to this CHAT
	// sequence (read live or as a hand-off copy). The fan-out makes no copy of a post at or
	// below it, and the member drops a copy at or below it. 0 means none confirmed.
	Position uint64 `json:"position,omitempty"`
}

// DecodeMembership reads a members row leniently (unknown fields ignored): the
// reference's form, or the form of earlier Go releases (the principal in "principal",
// state "left"), which it returns in the reference's form.
func DecodeMembership(b []byte) (Membership, error) {
	var r struct {
		Membership
		Principal string `json:"principal"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Membership{}, err
	}
	m := r.Membership
	if m.Owner == "" {
		m.Owner = r.Principal
	}
	if m.State == MembershipLeftGo {
		m.State = MembershipLeft
		if m.LeaveCursor == nil {
			at := m.JoinCursor // an earlier Go row omitted a zero leave cursor
			m.LeaveCursor = &at
		}
	}
	return m, nil
}

// Active reports whether the row admits every post after its join cursor (no leave yet).
func (m Membership) Active() bool { return m.LeaveCursor == nil }

// Covers reports whether the post at CHAT sequence seq falls in the row's window.
func (m Membership) Covers(seq uint64) bool {
	return m.JoinCursor < seq && (m.LeaveCursor == nil || seq <= *m.LeaveCursor)
}

// JoinResult is the data of a successful durable join: the hand-off durable to bind.
type JoinResult struct {
	Channel    string `json:"channel"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	JoinCursor uint64 `json:"joinCursor"`
	Generation uint64 `json:"generation"`
}

// ConnTuple names one client connection of the broker: the server's id, the connection's
// id there and the user nkey it authenticated with.
type ConnTuple struct {
	ServerID string `json:"serverId"`
	CID      uint64 `json:"cid"`
	UserNkey string `json:"userNkey"`
}

// LivenessArgs are the args of planeConnLiveness.
type LivenessArgs struct {
	Ledger  ConnTuple `json:"ledger"`
	Records ConnTuple `json:"records"`
}

// LivenessQuery is the args of planeConnLiveness as the reference sends them:
// {"query": {"ledger", "records"}}. A Go daemon also reads the bare LivenessArgs earlier
// Go releases sent.
type LivenessQuery struct {
	Query LivenessArgs `json:"query"`
}

// Connection liveness states. Gone is only ever said after a complete sweep; a caller
// treats unknown, a refusal or an answer that does not echo its query as "may be live".
const (
	ConnLive    = "live"
	ConnGone    = "gone"
	ConnUnknown = "unknown"
)

// TupleState is one tuple of a liveness answer.
type TupleState struct {
	Tuple ConnTuple `json:"tuple"`
	State string    `json:"state"`
}

// LivenessResult is the data of a planeConnLiveness answer.
type LivenessResult struct {
	Ledger        TupleState `json:"ledger"`
	Records       TupleState `json:"records"`
	SweepComplete bool       `json:"sweepComplete"`
	Note          string     `json:"note,omitempty"`
}

// EvictPrincipalsMax bounds the principals of one evictPrincipals request.
const EvictPrincipalsMax = 256

// PrincipalArgs are the args of principalLiveness and evictPrincipal: one principal in
// dot-form, "<owner>.<actor>", whose owner is "local", "u_…" or "p_…".
type PrincipalArgs struct {
	Principal string `json:"principal"`
}

// PrincipalsArgs are the args of evictPrincipals: 1 to EvictPrincipalsMax principals.
type PrincipalsArgs struct {
	Principals []string `json:"principals"`
}

// PrincipalLivenessResult is the data of a principalLiveness answer: the principal asked
// about, echoed, and State live (a connection attributed to it is open), gone (a complete
// sweep found none) or unknown.
type PrincipalLivenessResult struct {
	Principal     string `json:"principal"`
	State         string `json:"state"`
	SweepComplete bool   `json:"sweepComplete"`
	Note          string `json:"note,omitempty"`
}

// EvictionResult is what evictPrincipal did for one principal (evictPrincipals answers
// one per principal, in request order): the connections it closed, those still open after
// its verify rounds, and VerifiedGone, said only when a complete sweep found none.
type EvictionResult struct {
	Principal    string `json:"principal"`
	Kicked       int    `json:"kicked"`
	Remaining    int    `json:"remaining"`
	VerifiedGone bool   `json:"verifiedGone"`
	ScanComplete bool   `json:"scanComplete"`
	Note         string `json:"note,omitempty"`
}

// Plane responder states on the live rail.
const (
	ResponderBound   = "bound"   // this instance holds the ready lease and serves
	ResponderUnbound = "unbound" // no instance serves (or this one stopped serving)
	ResponderUnknown = "unknown" // the answer could not be read
)

// PlaneProbe is the answer on cotal.<space>.live.<plane>.<owner>.<actor>.
type PlaneProbe struct {
	Plane     string `json:"plane"`
	Responder string `json:"responder"`
	Instance  string `json:"instance,omitempty"`
}

// SignedBytes is what a member signs for a control request on subject with body: the
// subject, a newline and the body, so a signature cannot be replayed on another rail.
func SignedBytes(subject string, body []byte) []byte {
	b := make([]byte, 0, len(subject)+1+len(body))
	b = append(b, subject...)
	b = append(b, '\n')
	return append(b, body...)
}
