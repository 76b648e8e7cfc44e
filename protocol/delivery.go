package protocol

import (
	"encoding/json"
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

// ConsumerFanout names the delivery daemon's durable over CHAT.
const ConsumerFanout = "fanout"

// ConsumerCatchup names the daemon's transient reader that copies a new member's
// activation window.
const ConsumerCatchup = "dlvcatchup"

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

// Headers of a hand-off copy on a DLV subject. Only the delivery daemon may publish there,
// so a receiver trusts them; the body is the post's envelope, unchanged.
const (
	HeaderFrame   = "Cotal-Frame"   // frame version, "1"
	HeaderSubject = "Cotal-Subject" // the chat subject the post was published on
	HeaderSeq     = "Cotal-Seq"     // the post's CHAT stream sequence
	HeaderReason  = "Cotal-Reason"  // HandoffDurableChannel or HandoffLiveMention
	HeaderJWT     = "Cotal-Jwt"     // control request: the requester's user JWT
	HeaderSig     = "Cotal-Sig"     // control request: its user key's signature, base64url
	HeaderUID     = "Cotal-Uid"     // control request of a callout-admitted member: its lifecycle uid
)

// FrameVersion is the hand-off frame version this package writes.
const FrameVersion = "1"

// Why a hand-off copy was made.
const (
	HandoffDurableChannel = "durable-channel"
	HandoffLiveMention    = "live-mention"
)

// Control operations.
const (
	OpJoin              = "join"
	OpLeave             = "leave"
	OpListMemberships   = "listMemberships"
	OpPlaneConnLiveness = "planeConnLiveness"
)

// ControlRequest is the body of a request on a ctl rail.
type ControlRequest struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
	From EndpointRef     `json:"from"`
}

// ControlReply is the body of a ctl rail's answer.
type ControlReply struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
}

// MembershipArgs are the args of join and leave: the channel (a pattern may hold * and a
// final >) and the cursor, the CHAT stream's last sequence when the client subscribed live
// (join) or unsubscribed (leave).
type MembershipArgs struct {
	Channel string `json:"channel"`
	Cursor  uint64 `json:"cursor"`
}

// Membership states.
const (
	MembershipActive = "durable-active" // joined: posts after the join cursor are the member's
	MembershipLeft   = "left"           // tombstoned: posts after the leave cursor are not
)

// Membership is one durable membership row as the daemon keeps and reports it. A post at
// CHAT sequence s on a channel the row's pattern matches is the member's when
// JoinCursor < s and, once the member left, s <= LeaveCursor.
type Membership struct {
	Channel     string `json:"channel"`
	Principal   string `json:"principal"`
	UID         string `json:"lifecycleUid"`
	State       string `json:"state"`
	JoinCursor  uint64 `json:"joinCursor"`
	LeaveCursor uint64 `json:"leaveCursor,omitempty"` // set when State is MembershipLeft
	Generation  uint64 `json:"generation"`
	Writer      string `json:"writerIdentity,omitempty"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// Active reports whether the row admits every post after its join cursor (no leave yet).
func (m Membership) Active() bool { return m.State != MembershipLeft }

// Covers reports whether the post at CHAT sequence seq falls in the row's window.
func (m Membership) Covers(seq uint64) bool {
	return m.JoinCursor < seq && (m.Active() || seq <= m.LeaveCursor)
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
