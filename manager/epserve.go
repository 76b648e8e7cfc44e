package manager

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// The manager as an endpoint on the reference's ep rails: the same seats, the same
// operator-only authority as the operator rail, the reference's subjects, envelopes,
// command contracts and error codes. Go's own ctl.manager rails stay served beside it.

// InstanceID is the ep instance id of the manager of host: stable across its restarts
// (the reference persists one per workspace; Go keeps one manager per host and space),
// 26 lowercase base32 characters of a hash of the host name.
func InstanceID(host string) string {
	sum := sha256.Sum256([]byte("cotal-manager-instance\x00" + host))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// epServed are the commands of the reference's manager contract Go's manager runs; the
// others are refused unimplemented.
var epServed = map[string]bool{"status": true, "ps": true, "inspect": true, "spawn": true, "despawn": true, "input": true, "stop": true,
	"resolve-cwd": true, "list-personas": true, "show-persona": true, "run-start": true, "run-resume": true,
	"run-status": true, "run-ps": true, "run-answer": true}

// epServeFilters are the ep subjects the manager instance subscribes to: the class rail
// (in queue group manager), the scatter rail and its own instance rail.
func epServeFilters(space, instance string) (one, all, inst string) {
	p := protocol.Root + "." + space + ".ep."
	return p + "one." + mgrclient.EPEndpoint + ".>", p + "all." + mgrclient.EPEndpoint + ".>", p + "inst." + mgrclient.EPEndpoint + "." + instance + ".>"
}

// serveEP subscribes the ep rails; the subscriptions end with the connection.
func (m *Manager) serveEP() ([]*nats.Subscription, error) {
	one, all, inst := epServeFilters(m.Space, m.instanceID)
	nc := m.ep.Conn()
	var subs []*nats.Subscription
	q, err := nc.QueueSubscribe(one, mgrclient.EPEndpoint, m.handleEP)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", one, err)
	}
	subs = append(subs, q)
	for _, f := range []string{all, inst} {
		s, err := nc.Subscribe(f, m.handleEP)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, fmt.Errorf("subscribe %s: %w", f, err)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

// handleEP answers one ep request on its own goroutine.
func (m *Manager) handleEP(msg *nats.Msg) {
	s, ok := mgrclient.ParseEPSubject(m.Space, msg.Subject)
	if !ok || (s.Route == mgrclient.EPRouteInst && s.Instance != m.instanceID) {
		m.log.Debug("ep request of no manager shape ignored", "subject", msg.Subject)
		return
	}
	data := msg.Data
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r, perr := mgrclient.ParseEPRequest(data)
		var out any
		if perr == nil {
			out, perr = m.dispatchEP(r, s)
		}
		if perr != nil {
			m.log.Info("ep request refused", "caller", s.Caller.String(), "command", s.Command, "code", perr.Code, "why", perr.Message)
		}
		if mgrclient.EPIsCast(data) {
			return // a cast is never answered, not even with a refusal
		}
		id := r.ID
		if !mgrclient.ValidEPID(id) {
			id = "unknown" // the envelope was too broken to echo its id
		}
		reply := mgrclient.EPReply{V: 1, ID: id}
		if perr != nil {
			reply.Error = perr
		} else {
			b, err := json.Marshal(out)
			if err != nil {
				reply.Error = &mgrclient.EPError{Code: mgrclient.EPInternal, Message: "encode answer: " + err.Error(), Outcome: "unknown"}
			} else {
				reply.OK, reply.Data = true, b
			}
		}
		b, _ := json.Marshal(reply) // strings, booleans and raw JSON always encode
		if err := m.ep.Conn().Publish(mgrclient.EPReplySubject(m.Space, s, m.instanceID, m.epoch), b); err != nil {
			m.log.Warn("ep answer", "subject", msg.Subject, "err", err)
		}
	}()
}

// dispatchEP checks a request against its subject, the contract and the caller's
// authority, then runs it.
func (m *Manager) dispatchEP(r mgrclient.EPRequest, s mgrclient.EPSubject) (any, *mgrclient.EPError) {
	if err := mgrclient.CheckAgreement(r, s); err != nil {
		return nil, err
	}
	if r.Bind != nil && (r.Bind.InstanceID != m.instanceID || r.Bind.Epoch != m.epoch) {
		return nil, mgrclient.EPFail(mgrclient.EPFailedPrecondition, "bound to manager %s at epoch %d; this is %s at epoch %d", r.Bind.InstanceID, r.Bind.Epoch, m.instanceID, m.epoch)
	}
	if r.Op.Command != "describe" && !mgrclient.EPCommandKnown(s.Command) {
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "the manager has no command %q", s.Command)
	}
	// The authority of the operator rail: only the operator this manager runs for. The
	// broker lets only the project's own identity publish on the ep rails to the manager.
	if s.Caller != m.Operator {
		return nil, mgrclient.EPFail(mgrclient.EPPermissionDenied, "%s may not ask the manager to %s: the manager answers on its endpoint rails only the operator it runs for (%s)", s.Caller, s.Command, m.Operator)
	}
	if s.Command == "describe" {
		// The reserved discovery command: untargeted, void, pinning no contract.
		if s.Mode != "" || r.Target != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "describe is untargeted")
		}
		if err := epVoid(r); err != nil {
			return nil, err
		}
		return m.contract.Describe(m.Operator.Owner), nil
	}
	if err := mgrclient.CheckContract(r, s); err != nil {
		return nil, err
	}
	if !epServed[s.Command] {
		return nil, mgrclient.EPFail(mgrclient.EPUnimplemented, "this manager does not serve %s (see docs/interop.md)", s.Command)
	}
	who := caller{p: s.Caller, rail: protocol.ServiceManager, operator: true}
	out, err := m.runEP(who, r, s)
	if err != nil {
		var e *mgrclient.EPError
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, epFromRefusal(err)
	}
	return out, nil
}

// epFromRefusal maps a refusal of the shared handlers to its ep code.
func epFromRefusal(err error) *mgrclient.EPError {
	var rf *refusal
	if !errors.As(err, &rf) {
		return &mgrclient.EPError{Code: mgrclient.EPInternal, Message: err.Error(), Outcome: "unknown"}
	}
	code := mgrclient.EPInternal
	switch rf.code {
	case codeDenied:
		code = mgrclient.EPPermissionDenied
	case codeNotFound:
		code = mgrclient.EPNotFound
	case codeExists:
		code = mgrclient.EPAlreadyExists
	case codeBad:
		code = mgrclient.EPBadRequest
	case protocol.MgrCodeStopped:
		code = mgrclient.EPFailedPrecondition
	}
	return &mgrclient.EPError{Code: code, Message: rf.msg, Outcome: "not-executed"}
}

// epArgs decodes a command's args strictly into v: every key must be one v has.
func epArgs(r mgrclient.EPRequest, v any) *mgrclient.EPError {
	b := bytes.TrimSpace(r.Args)
	if len(b) == 0 || string(b) == "null" {
		b = []byte("{}")
	}
	if err := strictjson.Decode(b, v); err != nil {
		return mgrclient.EPFail(mgrclient.EPBadRequest, "args: %v", err)
	}
	return nil
}

// epVoid refuses args on a command whose input is the void schema.
func epVoid(r mgrclient.EPRequest) *mgrclient.EPError {
	if b := bytes.TrimSpace(r.Args); len(b) != 0 && string(b) != "null" {
		return mgrclient.EPFail(mgrclient.EPBadRequest, "args: the command takes none (absent or null)")
	}
	return nil
}

func (m *Manager) runEP(who caller, r mgrclient.EPRequest, s mgrclient.EPSubject) (any, error) {
	switch s.Command {
	case "status":
		if err := epVoid(r); err != nil {
			return nil, err
		}
		n := 0
		for _, row := range m.epRows() {
			if row.Status != string(protocol.SeatExited) {
				n++
			}
		}
		return mgrclient.EPStatus{InstanceID: m.instanceID, Runtime: "pty", Custody: "legacy", AgentCount: n,
			UptimeMs: time.Since(m.started).Milliseconds(), Connectors: []mgrclient.EPConnectorStatus{}, ClassSpawn: true,
			StaticReconciliation: mgrclient.EPStaticReconciliation{State: "idle", Failures: []json.RawMessage{}}}, nil
	case "ps":
		if err := epVoid(r); err != nil {
			return nil, err
		}
		return m.epRows(), nil
	case "inspect":
		var a struct {
			Name string `json:"name"`
		}
		if err := epArgs(r, &a); err != nil {
			return nil, err
		}
		for _, row := range m.epRows() {
			if a.Name != "" && row.Name == a.Name {
				return row, nil
			}
		}
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "no agent %q on this manager", a.Name)
	case "spawn":
		return m.epSpawn(who, r)
	case "run-start", "run-resume":
		return m.epRun(s, r)
	case "run-status", "run-ps":
		return m.epRunRead(s.Command, r)
	case "run-answer":
		return m.epRunAnswer(s.Caller, r)
	case "resolve-cwd":
		var a struct {
			Cwd string `json:"cwd"`
		}
		if err := epArgs(r, &a); err != nil {
			return nil, err
		}
		if !filepath.IsAbs(a.Cwd) {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "cwd %q is not an absolute path", a.Cwd)
		}
		dir, err := filepath.EvalSymlinks(a.Cwd)
		if st, serr := os.Stat(dir); err != nil || serr != nil || !st.IsDir() {
			return nil, mgrclient.EPFail(mgrclient.EPNotFound, "cwd %s is not a folder on the manager's host %s", a.Cwd, m.Host)
		}
		return map[string]string{"cwd": dir, "host": m.Host}, nil
	case "list-personas":
		if err := epVoid(r); err != nil {
			return nil, err
		}
		files, err := m.Project.PersonaFiles()
		if err != nil {
			return nil, err
		}
		rows := make([]mgrclient.EPPersonaRow, 0, len(files))
		for _, f := range files {
			if f.Err != nil {
				rows = append(rows, mgrclient.EPPersonaRow{Name: f.Name, Error: f.Err.Error()})
				continue
			}
			rows = append(rows, mgrclient.EPPersonaRow{Name: f.Persona.Name, Role: f.Persona.Role, Model: f.Persona.Model, Description: f.Persona.Description})
		}
		return map[string]any{"personas": rows}, nil
	case "show-persona":
		var a struct {
			Name string `json:"name"`
		}
		if err := epArgs(r, &a); err != nil {
			return nil, err
		}
		if err := workspace.CheckPersonaName(a.Name); err != nil {
			return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "persona %v", err)
		}
		per, err := m.Project.Persona(a.Name)
		if errors.Is(err, workspace.ErrNoPersona) {
			return nil, mgrclient.EPFail(mgrclient.EPNotFound, "no persona %q", a.Name)
		}
		if err != nil {
			return mgrclient.EPPersonaRow{Name: a.Name, Error: err.Error()}, nil
		}
		return mgrclient.EPPersonaRow{Name: per.Name, Role: per.Role, Model: per.Model, Description: per.Description, Persona: per.Prompt}, nil
	case "despawn", "stop", "input":
		st, err := m.epTargetSeat(s, r)
		if err != nil {
			return nil, err
		}
		if s.Command == "input" {
			var a struct {
				Text  *string `json:"text"`
				Enter *bool   `json:"enter"`
			}
			if err := epArgs(r, &a); err != nil {
				return nil, err
			}
			if a.Text == nil || *a.Text == "" || len(*a.Text) > 65536 {
				return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.text: want 1 to 65536 characters")
			}
			b := []byte(*a.Text)
			if a.Enter == nil || *a.Enter {
				b = append(b, '\r')
			}
			n, err := st.write(b)
			if err != nil {
				return nil, err
			}
			return map[string]any{"name": st.snapshot().Name, "bytes": n}, nil
		}
		var a struct {
			Graceful *bool `json:"graceful"`
		}
		if err := epArgs(r, &a); err != nil {
			return nil, err
		}
		// Go stops a seat one way: SIGTERM, then SIGKILL after the grace.
		st.stop(false, m.StopGrace)
		return mgrclient.EPStopResult{Name: st.snapshot().Name, Stopped: true, Graceful: a.Graceful != nil && *a.Graceful}, nil
	}
	return nil, mgrclient.EPFail(mgrclient.EPUnimplemented, "this manager does not serve %s", s.Command)
}

// epTargetSeat is the seat a targeted request names: the caller itself in self mode,
// else the body target, which must name a seat of this manager in its current
// incarnation (a stale lifecycle uid is expired).
func (m *Manager) epTargetSeat(s mgrclient.EPSubject, r mgrclient.EPRequest) (*seat, *mgrclient.EPError) {
	owner, actor, uid := s.Caller.Owner, s.Caller.Actor, s.UID
	if s.Mode != "self" {
		owner, actor, uid = r.Target.Owner, r.Target.Actor, r.Target.LifecycleUID
	}
	st := m.seat(actor)
	if owner != protocol.OwnerLocal || st == nil {
		return nil, mgrclient.EPFail(mgrclient.EPNotFound, "no agent %s.%s on this manager", owner, actor)
	}
	if info := st.snapshot(); epSeatUID(info) != uid {
		return nil, mgrclient.EPFail(mgrclient.EPExpired, "agent %s is now lifecycle %s, not %s", info.Name, epSeatUID(info), uid)
	}
	return st, nil
}

func (m *Manager) epSpawn(who caller, r mgrclient.EPRequest) (any, error) {
	var a mgrclient.EPSpawnArgs
	if err := epArgs(r, &a); err != nil {
		return nil, err
	}
	if a.Name == nil || *a.Name == "" {
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args.name is required")
	}
	var unserved []string
	for field, set := range map[string]bool{
		"config": a.Config != nil, "identity": a.Identity != nil, "variant": a.Variant != nil,
		"launchOptions": a.LaunchOptions != nil, "resume": a.Resume != nil, "events": a.Events != nil,
		"continueSession": a.ContinueSession != nil, "supervise": a.Supervise != nil,
		"subscribe": a.Subscribe != nil, "allowSubscribe": a.AllowSubscribe != nil,
		"allowPublish": a.AllowPublish != nil, "shareTools": a.ShareTools != nil,
	} {
		if set {
			unserved = append(unserved, field)
		}
	}
	if len(unserved) > 0 {
		sort.Strings(unserved)
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "args %s: this manager does not serve them on a spawn; a persona file (.cotal/agents/%s.md) sets an agent's channels and launch", strings.Join(unserved, ", "), *a.Name)
	}
	sa := protocol.SpawnArgs{Name: *a.Name, Agent: deref(a.Agent), Role: deref(a.Role), Model: deref(a.Model), Prompt: deref(a.Prompt), Cwd: deref(a.Cwd)}
	// The reference spawns the agent file of the name; Go's is the persona of that name,
	// else the default persona. defaultAgent is the harness when neither the request nor
	// the persona names one.
	per, err := m.Project.Persona(sa.Name)
	switch {
	case err == nil && per != nil:
		sa.Persona = sa.Name
	case err != nil && !errors.Is(err, workspace.ErrNoPersona):
		return nil, mgrclient.EPFail(mgrclient.EPBadRequest, "persona %s: %v", sa.Name, err)
	}
	if sa.Agent == "" && a.DefaultAgent != nil {
		if p, err := m.personaFor(sa.Persona); err == nil && p.Agent == "" {
			sa.Agent = *a.DefaultAgent
		}
	}
	res, err := m.spawn(who, sa)
	if err != nil {
		return nil, err
	}
	uid := res.UID
	if st := m.seat(res.Name); st != nil {
		uid = epSeatUID(st.snapshot())
	}
	fp := mgrclient.ContractDigest(map[string]any{"op": r.Op, "args": json.RawMessage(orNull(r.Args))})
	return mgrclient.EPSpawnResult{Name: res.Name, Owner: protocol.OwnerLocal, Actor: res.Name, UID: uid, GoalID: r.ID,
		Fingerprint: fp, ReadinessDeadlineMs: res.WindowMs, Executor: mgrclient.EPExecutor{LifecycleUID: m.instanceID, Epoch: m.epoch}}, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// epSeatUID is a seat's lifecycle uid on the ep rails: its credential's on a mesh that
// checks credentials; on an open mesh, where a seat has none, a token of this seat's
// incarnation (its name, its manager run and its start), so a target naming an earlier
// seat of the name is still told apart.
func epSeatUID(info protocol.SeatInfo) string {
	if info.UID != "" {
		return info.UID
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "cotal-seat\x00%s\x00%s\x00%d", info.Name, info.Instance, info.Started))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// epRows are the seats as the reference's agent rows, by name.
func (m *Manager) epRows() []mgrclient.EPAgentRow {
	m.mu.Lock()
	seats := make([]*seat, 0, len(m.seats))
	for _, s := range m.seats {
		seats = append(seats, s)
	}
	m.mu.Unlock()
	rows := make([]mgrclient.EPAgentRow, 0, len(seats))
	now := time.Now().UnixMilli()
	for _, s := range seats {
		info := s.snapshot()
		var up int64
		if info.Started > 0 {
			end := now
			if info.Ended > 0 {
				end = info.Ended
			}
			up = max(end-info.Started, 0)
		}
		rows = append(rows, mgrclient.EPAgentRow{Name: info.Name, ID: protocol.Principal{Owner: protocol.OwnerLocal, Actor: info.Name}.String(),
			Role: info.Role, Agent: info.Agent, Space: m.Space, Mode: "detached", Status: string(info.Process),
			UptimeMs: up, Mesh: m.meshState(info.Name), LifecycleUID: epSeatUID(info),
			Model: info.Model, Cwd: info.Cwd, PID: max(info.PID, 0), Spawner: info.Spawner, InstanceID: m.instanceID, Host: info.Host})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}
