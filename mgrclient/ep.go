package mgrclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/protocol"
)

// The reference's v0.4 endpoint rails (packages/core/src/endpoint-subjects.ts,
// endpoint-envelope.ts), as far as the manager serves them. A request rides
//
//	cotal.<space>.ep.{one|all}.manager.<command>[.<mode>[.<target…>]].<owner>.<actor>.<uid>.<nonce>
//	cotal.<space>.ep.inst.manager.<instanceId>.<command>[…].<owner>.<actor>.<uid>.<nonce>
//
// and is answered on cotal.<space>.ep.reply.manager.<instanceId>.<epoch>.<owner>.<actor>.<uid>.<nonce>,
// derived from the request subject alone (never from a transport reply subject).

// Route of a request: one instance of the class (queue group), every instance, or one
// instance by id.
const (
	EPRouteOne  = "one"
	EPRouteAll  = "all"
	EPRouteInst = "inst"
)

// EP error codes (endpoint-error.ts EP_ERROR_CODES) the manager answers with.
const (
	EPBadRequest         = "bad-request"
	EPUnsupportedVersion = "unsupported-version"
	EPOpMismatch         = "op-mismatch"
	EPClassMismatch      = "class-mismatch"
	EPTargetMismatch     = "target-mismatch"
	EPSenderMismatch     = "sender-mismatch"
	EPPermissionDenied   = "permission-denied"
	EPNotFound           = "not-found"
	EPAlreadyExists      = "already-exists"
	EPContractMismatch   = "contract-mismatch"
	EPFailedPrecondition = "failed-precondition"
	EPExpired            = "expired"
	EPUnimplemented      = "unimplemented"
	EPInternal           = "internal"
	EPConflict           = "conflict"
	EPUnavailable        = "unavailable"
)

var (
	epLifecycle = regexp.MustCompile(`^[a-z0-9]{26,32}$`)
	epNonce     = regexp.MustCompile(`^[A-Za-z0-9_-]{22,64}$`)
	epID        = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	epCommandRe = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	epDigest    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// epModeArity is how many target tokens follow each authorization-mode token.
var epModeArity = map[string]int{"self": 0, "owner": 1, "any": 1, "child": 1, "ledger": 1, "handle": 3}

// EPSubject is a parsed manager request subject.
type EPSubject struct {
	Route    string // EPRouteOne, EPRouteAll or EPRouteInst
	Instance string // with EPRouteInst
	Command  string
	Mode     string   // "" for an untargeted command
	Target   []string // the target tokens of Mode
	Caller   protocol.Principal
	UID      string // the caller's lifecycle uid
	Nonce    string
}

// EPRequestSubject builds a manager request subject (the reference's epRequestSubject);
// instance is used with EPRouteInst only.
func EPRequestSubject(space, route, instance, command, mode string, target []string, caller protocol.Principal, uid, nonce string) string {
	t := []string{protocol.Root, space, "ep", route, EPEndpoint}
	if route == EPRouteInst {
		t = append(t, instance)
	}
	t = append(t, command)
	if mode != "" {
		t = append(append(t, mode), target...)
	}
	return strings.Join(append(t, caller.Owner, caller.Actor, uid, nonce), ".")
}

// ParseEPSubject parses a request subject to the manager of space; ok is false for any
// other shape (which must not be handled).
func ParseEPSubject(space, subject string) (EPSubject, bool) {
	if len(subject) > 1024 {
		return EPSubject{}, false
	}
	rest, found := strings.CutPrefix(subject, protocol.Root+"."+space+".ep.")
	if !found {
		return EPSubject{}, false
	}
	t := strings.Split(rest, ".")
	var s EPSubject
	if len(t) < 2 || t[1] != EPEndpoint {
		return EPSubject{}, false
	}
	s.Route, t = t[0], t[2:]
	switch s.Route {
	case EPRouteOne, EPRouteAll:
	case EPRouteInst:
		if len(t) == 0 || !epLifecycle.MatchString(t[0]) {
			return EPSubject{}, false
		}
		s.Instance, t = t[0], t[1:]
	default:
		return EPSubject{}, false
	}
	if len(t) < 5 || !epCommandRe.MatchString(t[0]) {
		return EPSubject{}, false
	}
	s.Command, t = t[0], t[1:]
	if n, isMode := epModeArity[t[0]]; isMode {
		if len(t) != 1+n+4 {
			return EPSubject{}, false
		}
		s.Mode, s.Target, t = t[0], t[1:1+n], t[1+n:]
	} else if len(t) != 4 {
		return EPSubject{}, false
	}
	p, err := protocol.ParsePrincipal(t[0] + "." + t[1])
	if err != nil || !epLifecycle.MatchString(t[2]) || !epNonce.MatchString(t[3]) {
		return EPSubject{}, false
	}
	s.Caller, s.UID, s.Nonce = p, t[2], t[3]
	return s, true
}

// EPReplySubject is where the manager instance at epoch answers the request s
// (the reference's deriveReplySubject).
func EPReplySubject(space string, s EPSubject, instance string, epoch uint64) string {
	return strings.Join([]string{protocol.Root, space, "ep", "reply", EPEndpoint, instance,
		strconv.FormatUint(epoch, 10), s.Caller.Owner, s.Caller.Actor, s.UID, s.Nonce}, ".")
}

// EPReplyFilter is what a caller subscribes to for the answers to its requests: its own
// reply rail, exact arity.
func EPReplyFilter(space string, caller protocol.Principal, uid string) string {
	return strings.Join([]string{protocol.Root, space, "ep", "reply", "*", "*", "*", caller.Owner, caller.Actor, uid, "*"}, ".")
}

// EPOp binds a request to a command and the contract digests the caller pinned.
type EPOp struct {
	Endpoint     string `json:"endpoint"`
	Command      string `json:"command"`
	InputDigest  string `json:"inputDigest,omitempty"`
	OutputDigest string `json:"outputDigest,omitempty"`
}

// EPTarget is a request's body target: the agent a targeted command acts on.
type EPTarget struct {
	Owner           string  `json:"owner"`
	Actor           string  `json:"actor"`
	LifecycleUID    string  `json:"lifecycleUid"`
	MappingRevision *uint64 `json:"mappingRevision,omitempty"`
}

// EPBind is the incarnation a caller resolved against; another refuses.
type EPBind struct {
	InstanceID string `json:"instanceId"`
	Epoch      uint64 `json:"epoch"`
}

// EPFrom is the caller's endpoint reference.
type EPFrom struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// EPRequest is the reference's EndpointRequest envelope (version 1).
type EPRequest struct {
	V             int             `json:"v"`
	ID            string          `json:"id"`
	Op            EPOp            `json:"op"`
	Class         string          `json:"class"`
	ReplyExpected bool            `json:"replyExpected"`
	GoalID        string          `json:"goalId,omitempty"`
	Target        *EPTarget       `json:"target,omitempty"`
	Bind          *EPBind         `json:"bind,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	From          EPFrom          `json:"from"`
	DeadlineMs    int64           `json:"deadlineMs,omitempty"`
	Correlation   json.RawMessage `json:"correlation,omitempty"`
	Auth          string          `json:"auth,omitempty"`
}

// EPError is a refusal on the ep rails.
type EPError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Outcome is executed, not-executed or unknown; absent reads as unknown.
	Outcome string `json:"outcome,omitempty"`
}

func (e *EPError) Error() string { return e.Code + ": " + e.Message }

// EPFail is a refusal with code, said before anything was done.
func EPFail(code, format string, args ...any) *EPError {
	return &EPError{Code: code, Message: fmt.Sprintf(format, args...), Outcome: "not-executed"}
}

// EPReply is the reference's EndpointReply envelope (version 1).
type EPReply struct {
	V     int             `json:"v"`
	ID    string          `json:"id"`
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error *EPError        `json:"error,omitempty"`
}

// EPIsCast reports whether a request body says it is a cast (replyExpected false), which
// is never answered, not even with a refusal.
func EPIsCast(b []byte) bool {
	var head struct {
		ReplyExpected *bool `json:"replyExpected"`
	}
	return json.Unmarshal(b, &head) == nil && head.ReplyExpected != nil && !*head.ReplyExpected
}

// ParseEPRequest decodes and checks a request envelope the way the reference's
// parseEndpointRequest does: the version first, then the shape, each fault with its code.
// Unknown fields are ignored.
func ParseEPRequest(b []byte) (EPRequest, *EPError) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(b, &head); err != nil || head == nil {
		return EPRequest{}, EPFail(EPBadRequest, "request is not a JSON object")
	}
	if v := bytes.TrimSpace(head["v"]); string(v) != "1" {
		return EPRequest{}, EPFail(EPUnsupportedVersion, "request envelope version %s is not 1", orAbsent(v))
	}
	var r EPRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return EPRequest{}, EPFail(EPBadRequest, "request: %v", err)
	}
	switch {
	case !epID.MatchString(r.ID):
		return r, EPFail(EPBadRequest, "id %q is not a valid id token ([A-Za-z0-9_-]{1,64})", r.ID)
	case r.Op.Endpoint == "" || r.Op.Command == "" || !epCommandRe.MatchString(r.Op.Command):
		return r, EPFail(EPBadRequest, "op needs an endpoint and a command token")
	}
	if r.Op.Command != "describe" && (r.Op.InputDigest == "" || r.Op.OutputDigest == "") {
		return r, EPFail(EPContractMismatch, "op.inputDigest and op.outputDigest are required on every command except describe")
	}
	for _, d := range []string{r.Op.InputDigest, r.Op.OutputDigest} {
		if d != "" && !epDigest.MatchString(d) {
			return r, EPFail(EPBadRequest, "op digest %q is not a sha256:<hex> digest", d)
		}
	}
	if r.Class != "ephemeral" && r.Class != "journal" {
		return r, EPFail(EPBadRequest, "class %q is not \"ephemeral\" or \"journal\"", r.Class)
	}
	if _, ok := head["replyExpected"]; !ok {
		return r, EPFail(EPBadRequest, "replyExpected is not a boolean")
	}
	if r.Class == "journal" && r.ReplyExpected {
		return r, EPFail(EPBadRequest, "a journal-class submission sets replyExpected: false; it is never a call")
	}
	if _, ok := head["deadlineMs"]; ok && r.DeadlineMs <= 0 {
		return r, EPFail(EPBadRequest, "deadlineMs must be a positive budget")
	}
	if r.ReplyExpected && r.DeadlineMs == 0 {
		return r, EPFail(EPBadRequest, "deadlineMs is required for a call")
	}
	if r.GoalID != "" && !epID.MatchString(r.GoalID) {
		return r, EPFail(EPBadRequest, "goalId %q is not a valid id token", r.GoalID)
	}
	if r.Target != nil && (r.Target.Owner == "" || r.Target.Actor == "" || !epLifecycle.MatchString(r.Target.LifecycleUID)) {
		return r, EPFail(EPBadRequest, "target needs an owner, an actor and a lifecycleUid ([a-z0-9]{26,32})")
	}
	if r.Bind != nil && !epLifecycle.MatchString(r.Bind.InstanceID) {
		return r, EPFail(EPBadRequest, "bind.instanceId %q is not a lifecycle token", r.Bind.InstanceID)
	}
	if r.From.ID == "" || r.From.Name == "" {
		return r, EPFail(EPBadRequest, "from needs an id and a name")
	}
	return r, nil
}

func orAbsent(b []byte) string {
	if len(b) == 0 {
		return "(absent)"
	}
	return string(b)
}

// CheckAgreement is the body-to-subject half of the consuming boundary
// (checkRequestSubjectAgreement): op names the subject's endpoint and command, a target
// is in the body exactly when the subject has one and names the same owner, and from.id
// is the subject's caller.
func CheckAgreement(r EPRequest, s EPSubject) *EPError {
	switch {
	case r.Op.Endpoint != EPEndpoint:
		return EPFail(EPOpMismatch, "op.endpoint %q does not agree with the subject endpoint %q", r.Op.Endpoint, EPEndpoint)
	case r.Op.Command != s.Command:
		return EPFail(EPOpMismatch, "op.command %q does not agree with the subject command %q", r.Op.Command, s.Command)
	case s.Route == EPRouteAll && r.DeadlineMs == 0:
		return EPFail(EPBadRequest, "deadlineMs is required on the scatter rail")
	case r.Bind != nil && s.Route == EPRouteAll:
		return EPFail(EPBadRequest, "a bind on the scatter rail has no coherent reading")
	case r.Bind != nil && s.Route == EPRouteInst && r.Bind.InstanceID != s.Instance:
		return EPFail(EPBadRequest, "bind.instanceId %q contradicts the subject's instance %q", r.Bind.InstanceID, s.Instance)
	}
	if s.Mode == "" || s.Mode == "self" {
		if r.Target != nil {
			return EPFail(EPTargetMismatch, "a body target on an untargeted or self request is refused, never ignored")
		}
	} else {
		if r.Target == nil {
			return EPFail(EPTargetMismatch, "the %q form requires a body target", s.Mode)
		}
		if r.Target.Owner != s.Target[0] {
			return EPFail(EPTargetMismatch, "target.owner %q does not equal the subject's target owner %q", r.Target.Owner, s.Target[0])
		}
		if s.Mode == "handle" && (r.Target.Actor != s.Target[1] || r.Target.LifecycleUID != s.Target[2]) {
			return EPFail(EPTargetMismatch, "in handle mode the body target must equal the subject's")
		}
	}
	if r.From.ID != s.Caller.String() {
		return EPFail(EPSenderMismatch, "from.id %q does not equal the subject's sender %q", r.From.ID, s.Caller)
	}
	return nil
}

// CheckContract holds the request to the command's row: its class, its authorization
// modes, and the digests the caller pinned.
func CheckContract(r EPRequest, s EPSubject) *EPError {
	c, ok := epCommandOf(s.Command)
	if !ok {
		return EPFail(EPNotFound, "the manager has no command %q", s.Command)
	}
	if r.Class != "ephemeral" {
		return EPFail(EPClassMismatch, "class %q does not equal the command's contract class \"ephemeral\"", r.Class)
	}
	if r.GoalID != "" {
		return EPFail(EPBadRequest, "goalId %q on a command that does not declare the action composite", r.GoalID)
	}
	switch {
	case len(c.modes) == 0 && s.Mode != "":
		return EPFail(EPBadRequest, "command %s is untargeted: no %q mode", c.name, s.Mode)
	case len(c.modes) > 0 && !slices.Contains(c.modes, s.Mode):
		return EPFail(EPBadRequest, "command %s takes the modes %s, not %q", c.name, strings.Join(c.modes, ", "), s.Mode)
	}
	in, out, _ := EPContractDigests(c.name)
	if r.Op.InputDigest != in || r.Op.OutputDigest != out {
		return EPFail(EPContractMismatch, "the pinned digests of %s (input %s, output %s) are not this manager's (input %s, output %s, cluster %s revision %d)",
			c.name, r.Op.InputDigest, r.Op.OutputDigest, in, out, EPClusterURN, EPClusterRevision)
	}
	return nil
}

// ValidEPID reports whether s is a valid envelope id token ([A-Za-z0-9_-]{1,64}).
func ValidEPID(s string) bool { return epID.MatchString(s) }

// EPCommandKnown reports whether the manager's contract has a row for command.
func EPCommandKnown(command string) bool {
	_, ok := epCommandOf(command)
	return ok
}
