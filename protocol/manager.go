package protocol

import (
	"encoding/json"
	"strings"
)

// The manager's Go control rails (it also answers the reference's ep.* endpoint rails;
// see docs/interop.md). A request is published on
// cotal.<space>.ctl.<service>.<owner>.<actor>.<op>, where the broker pins <owner>.<actor>
// to the caller's own principal, and answered on <request>.reply.<nonce>. Two services
// share the same ops: ServiceManager for the operator the manager runs for (everything; admins are refused), and
// ServiceManagerAgent for agents whose persona has the spawn capability (spawn, and stop
// of the seats they spawned). The manager also registers them as the NATS micro service
// ManagerServiceName, so `$SRV.INFO` discovers it.
const (
	ServiceManager      = "manager"
	ServiceManagerAgent = "manager-agent"
	ManagerServiceName  = "cotal-manager"
)

// Manager operations (the last subject token and the micro endpoint names).
const (
	MgrSpawn  = "spawn"
	MgrPs     = "ps"
	MgrStop   = "stop"
	MgrAttach = "attach"
	MgrInput  = "input"
	// MgrTurnPending and MgrTurnYield are a seat's own reach into the turns a workflow run
	// handed it (any agent, for itself only, on the agent rail).
	MgrTurnPending = "turn-pending"
	MgrTurnYield   = "turn-yield"
)

// MgrOps are the manager's operations, in the order it registers them.
var MgrOps = []string{MgrSpawn, MgrPs, MgrStop, MgrAttach, MgrInput, MgrTurnPending, MgrTurnYield}

// BucketManager names the manager lease KV bucket: one row lease.<host> per host that
// runs a manager for the space.
func BucketManager(space string) string { return "cotal_manager_" + space }

// ManagerLeaseKey is the lease row of the manager of host (a token of the host name).
func ManagerLeaseKey(host string) string { return "lease." + Token(host) }

// MgrSubject is where sender asks the manager service svc to do op.
func MgrSubject(space, svc string, sender Principal, op string) string {
	return CtlSubject(space, svc, sender) + "." + op
}

// MgrFilter selects every request of op to the manager service svc.
func MgrFilter(space, svc, op string) string { return CtlFilter(space, svc) + "." + op }

// MgrAnyFilter selects every request of op on a ctl rail with a principal, which the
// manager's micro endpoint for op subscribes to (one subject serves both manager
// services; a request on any other service is ignored).
func MgrAnyFilter(space, op string) string { return Root + "." + space + ".ctl.*.*.*." + op }

// ParseMgrSubject returns the service, caller and op of a manager request subject of
// space; ok is false for any other subject.
func ParseMgrSubject(space, subject string) (svc string, caller Principal, op string, ok bool) {
	rest, found := strings.CutPrefix(subject, Root+"."+space+".ctl.")
	if !found {
		return "", Principal{}, "", false
	}
	t := strings.Split(rest, ".")
	if len(t) != 4 || (t[0] != ServiceManager && t[0] != ServiceManagerAgent) {
		return "", Principal{}, "", false
	}
	p, err := ParsePrincipal(t[1] + "." + t[2])
	if err != nil {
		return "", Principal{}, "", false
	}
	for _, o := range MgrOps {
		if t[3] == o {
			return t[0], p, o, true
		}
	}
	return "", Principal{}, "", false
}

// MgrReply is the body of every manager answer: {ok:true, data} or {ok:false, error}.
// Code is a short token for a refusal a program branches on: one of the MgrCode
// constants.
type MgrReply struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
	Code  string          `json:"code,omitempty"`
}

// SpawnArgs asks the manager to start an agent in a seat.
type SpawnArgs struct {
	Persona string   `json:"persona,omitempty"` // "" means the default persona
	Name    string   `json:"name,omitempty"`    // explicit name: refused when taken; "" derives it from the persona
	Agent   string   `json:"agent,omitempty"`   // connector; "" means the persona's, else claude
	Role    string   `json:"role,omitempty"`
	Model   string   `json:"model,omitempty"`
	Prompt  string   `json:"prompt,omitempty"`
	Cwd     string   `json:"cwd,omitempty"` // on the manager's host; "" is the project root
	Args    []string `json:"args,omitempty"`
	Wait    bool     `json:"wait,omitempty"` // answer only once the spawn settles
}

// SpawnResult is the manager's answer to a spawn: the seat's name and lifecycle uid at
// once, and with Wait the settle outcome.
type SpawnResult struct {
	Name    string `json:"name"`
	Persona string `json:"persona"`
	Agent   string `json:"agent"`
	UID     string `json:"uid"`
	// WindowMs is how long the manager waits for the agent's presence.
	WindowMs int64 `json:"readinessDeadlineMs"`
	// Outcome is "" (pending) or one of the settle outcomes.
	Outcome string `json:"outcome,omitempty"`
	Code    *int   `json:"code,omitempty"` // exit code, with Outcome failed
	LogTail string `json:"logTail,omitempty"`
}

// Settle outcomes of a spawn.
const (
	SettleSucceeded = "succeeded" // its presence appeared within the window
	SettleFailed    = "failed"    // it exited first
	SettleUncertain = "uncertain" // the window passed without either
)

// NameArgs names one seat (stop, attach's first request, settle waits).
type NameArgs struct {
	Name  string `json:"name"`
	Force bool   `json:"force,omitempty"` // stop: SIGKILL at once
	Wait  bool   `json:"wait,omitempty"`  // ps: answer once Name's spawn has settled
}

// SeatInfo is one row of ps.
type SeatInfo struct {
	Name     string    `json:"name"`
	Persona  string    `json:"persona"`
	Agent    string    `json:"agent"`
	Model    string    `json:"model,omitempty"`
	Role     string    `json:"role,omitempty"`
	UID      string    `json:"uid"`
	PID      int       `json:"pid"`
	Process  SeatState `json:"process"`
	Code     *int      `json:"code,omitempty"`
	Started  int64     `json:"started"`           // unix ms
	Ended    int64     `json:"ended,omitempty"`   // unix ms
	Mesh     string    `json:"mesh"`              // idle, working, waiting, offline, not in roster
	Outcome  string    `json:"outcome,omitempty"` // settle outcome; "" while pending
	Spawner  string    `json:"spawner"`           // principal that asked for it
	Cwd      string    `json:"cwd,omitempty"`
	Host     string    `json:"host"`
	Adopted  bool      `json:"adopted,omitempty"` // found running by a later manager: no terminal
	LogTail  string    `json:"logTail,omitempty"`
	Restarts int       `json:"restarts,omitempty"`
	Instance string    `json:"instance"` // the manager run that owns it
}

// PsResult is the answer to ps.
type PsResult struct {
	Seats []SeatInfo `json:"seats"`
}

// AttachArgs opens, renews or closes an attach session. The session's output flows to
// the reply subject of the first request (<request>.reply.<Session>): the first message
// is the MgrReply, then raw terminal bytes with header MgrTTYHeader=out, and one
// MgrTTYHeader=exit when the seat ends.
type AttachArgs struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Renew   bool   `json:"renew,omitempty"`
	Detach  bool   `json:"detach,omitempty"`
	Cols    int    `json:"cols,omitempty"`
	Rows    int    `json:"rows,omitempty"`
}

// AttachResult answers the first attach: the screen so far, to repaint.
type AttachResult struct {
	Screen []byte `json:"screen"`
	TTLMs  int64  `json:"ttlMs"` // renew before this passes
}

// InputArgs types bytes into a seat's terminal.
type InputArgs struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// MgrTTYHeader marks a terminal frame of an attach session: "out" or "exit".
const MgrTTYHeader = "Cotal-Tty"
