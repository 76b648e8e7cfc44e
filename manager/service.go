package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// refusal is an answer with a code a program branches on and a message a person reads.
type refusal struct {
	code string
	msg  string
}

func (r *refusal) Error() string { return r.msg }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// Refusal codes (protocol.MgrCode*).
const (
	codeDenied   = protocol.MgrCodeDenied
	codeNotFound = protocol.MgrCodeNotFound
	codeExists   = protocol.MgrCodeExists
	codeBad      = protocol.MgrCodeBad
)

// caller is who asks: its principal, whether it asked on the operator rail, and whether
// it is the operator (the operator rail, as the operator the manager runs for).
type caller struct {
	p        protocol.Principal
	rail     string // protocol.ServiceManager or protocol.ServiceManagerAgent
	operator bool
}

// handle answers one request on its own goroutine (a stop or a waiting spawn takes time).
func (m *Manager) handle(req micro.Request) {
	svc, p, op, ok := protocol.ParseMgrSubject(m.Space, req.Subject())
	if !ok {
		return // another rail's request that the wildcard caught
	}
	if req.Reply() != "" && !protocol.IsReplyTo(req.Subject(), req.Reply()) {
		m.log.Debug("manager request with a foreign reply subject ignored", "subject", req.Subject(), "reply", req.Reply())
		return
	}
	who := caller{p: p, rail: svc, operator: svc == protocol.ServiceManager && p == m.Operator}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		data, err := m.dispatch(who, op, req)
		if req.Reply() == "" {
			return
		}
		m.respond(req, data, err)
	}()
}

func (m *Manager) respond(req micro.Request, data any, err error) {
	var r protocol.MgrReply
	if err != nil {
		r.Error = err.Error()
		var rf *refusal
		if errors.As(err, &rf) {
			r.Code = rf.code
		} else {
			r.Code = protocol.MgrCodeInternal
		}
	} else {
		r.OK = true
		if r.Data, err = json.Marshal(data); err != nil {
			r.OK, r.Error, r.Code = false, "encode answer: "+err.Error(), protocol.MgrCodeInternal
		}
	}
	b, _ := json.Marshal(r) // a struct of strings and raw JSON always encodes
	if err := req.Respond(b); err != nil {
		m.log.Warn("answer", "subject", req.Subject(), "err", err)
	}
}

func (m *Manager) dispatch(who caller, op string, req micro.Request) (any, error) {
	if err := m.authorize(who, op); err != nil {
		m.log.Info("refused", "caller", who.p.String(), "op", op, "why", err)
		return nil, err
	}
	switch op {
	case protocol.MgrSpawn:
		var a protocol.SpawnArgs
		dec := decode
		if !who.operator {
			dec = decodeAgentSpawn
		}
		if err := dec(req.Data(), &a); err != nil {
			return nil, err
		}
		return m.spawn(who, a)
	case protocol.MgrPs:
		var a protocol.NameArgs
		if err := decode(req.Data(), &a); err != nil {
			return nil, err
		}
		return m.ps(who, a)
	case protocol.MgrStop:
		var a protocol.NameArgs
		if err := decode(req.Data(), &a); err != nil {
			return nil, err
		}
		return m.stop(who, a)
	case protocol.MgrAttach:
		var a protocol.AttachArgs
		if err := decode(req.Data(), &a); err != nil {
			return nil, err
		}
		return m.attach(a, req.Reply())
	case protocol.MgrInput:
		var a protocol.InputArgs
		if err := decode(req.Data(), &a); err != nil {
			return nil, err
		}
		return m.input(a)
	case protocol.MgrTurnPending:
		return m.turnPending(who)
	case protocol.MgrTurnYield:
		var a mgrclient.TurnYieldArgs
		if err := decodeAgentSpawn(req.Data(), &a); err != nil {
			return nil, refuse(codeBad, "turn-yield: want {goalId, status, to?, note?, value?}")
		}
		return m.turnYield(m.ctx, who, a)
	}
	return nil, refuse(codeBad, "unknown operation %q", op)
}

func decode(b []byte, v any) error {
	if len(b) == 0 {
		b = []byte("{}")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return refuse(codeBad, "request body: %v", err)
	}
	return nil
}

// decodeAgentSpawn decodes an agent's spawn request, refusing a key SpawnArgs has no
// field for (a program, an environment): what an agent may not choose is refused, never
// silently dropped.
func decodeAgentSpawn(b []byte, v any) error {
	if len(b) == 0 {
		b = []byte("{}")
	}
	if err := strictjson.Decode(b, v); err != nil {
		return refuse(codeBad, "spawn request: %v: an agent asks for a persona, a name, a model and a first prompt; the program, its arguments, folder and environment are never an agent's to choose", err)
	}
	return nil
}

// authorize decides who may do what: the operator everything; an agent with the spawn
// capability spawn, ps and stop (each narrowed later to its own seats); anyone else
// nothing. The operator rail answers only the operator this manager runs for: the broker
// lets only the project's own identity publish there, and a credential minted before that
// rule (an old admin credential) still finds the manager refusing it.
func (m *Manager) authorize(who caller, op string) error {
	if who.operator {
		return nil
	}
	if who.rail == protocol.ServiceManagerAgent && (op == protocol.MgrTurnPending || op == protocol.MgrTurnYield) {
		return nil // a seat's own turns: any agent, for itself only (runs.go)
	}
	if who.rail == protocol.ServiceManager {
		return refuse(codeDenied, "%s may not use the manager's operator rail: it answers there only the operator it runs for (%s), with the project's own identity (an agent with the spawn capability asks on its own rail)", who.p, m.Operator)
	}
	caps, from := m.capabilities(who.p)
	if !slices.Contains(caps, trust.CapabilitySpawn) {
		return refuse(codeDenied, "%s may not ask the manager to %s: %s has no spawn capability (add capabilities: [spawn] to its persona, or ask the operator)", who.p, op, from)
	}
	switch op {
	case protocol.MgrSpawn, protocol.MgrPs, protocol.MgrStop:
		return nil
	}
	return refuse(codeDenied, "%s may not %s: only the operator attaches to a seat or types into it", who.p, op)
}

// capabilities are the persona capabilities of an agent (see personaOf), and where
// they come from, for a refusal.
func (m *Manager) capabilities(p protocol.Principal) ([]string, string) {
	if p.Owner != protocol.OwnerLocal {
		return nil, "an agent of owner " + p.Owner
	}
	per := m.personaOf(p)
	if per == nil {
		return nil, "no persona " + p.Actor
	}
	return per.Capabilities, "its persona " + per.Name
}

// personaOf is the persona of a local agent: the persona of the seat of that name, else
// the persona file named like the agent (a foreground spawn's default name); nil when
// there is none.
func (m *Manager) personaOf(p protocol.Principal) *workspace.Persona {
	if p.Owner != protocol.OwnerLocal {
		return nil
	}
	m.mu.Lock()
	s := m.seats[p.Actor]
	m.mu.Unlock()
	if s != nil && s.running() {
		return s.persona
	}
	per, err := m.Project.Persona(p.Actor)
	if err != nil {
		return nil
	}
	return per
}

// ps lists the seats: every one for the operator, the ones it spawned for an agent.
// With Wait it first waits for the spawn of Name to settle.
func (m *Manager) ps(who caller, a protocol.NameArgs) (protocol.PsResult, error) {
	if a.Wait && a.Name != "" {
		s := m.seat(a.Name)
		if s == nil {
			return protocol.PsResult{}, refuse(codeNotFound, "no seat %q on this manager", a.Name)
		}
		select {
		case <-s.settled:
		case <-m.ctx.Done():
		}
	}
	m.mu.Lock()
	seats := make([]*seat, 0, len(m.seats))
	for _, s := range m.seats {
		seats = append(seats, s)
	}
	m.mu.Unlock()
	res := protocol.PsResult{Seats: []protocol.SeatInfo{}}
	for _, s := range seats {
		info := s.snapshot()
		if a.Name != "" && info.Name != a.Name {
			continue
		}
		if !who.operator && info.Spawner != who.p.String() {
			continue
		}
		info.Mesh = m.meshState(info.Name)
		res.Seats = append(res.Seats, info)
	}
	sort.Slice(res.Seats, func(i, j int) bool { return res.Seats[i].Name < res.Seats[j].Name })
	return res, nil
}

func (m *Manager) seat(name string) *seat {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seats[name]
}

// stop stops one seat: the operator any, an agent one it spawned or itself.
func (m *Manager) stop(who caller, a protocol.NameArgs) (protocol.SeatInfo, error) {
	s := m.seat(a.Name)
	if s == nil {
		return protocol.SeatInfo{}, refuse(codeNotFound, "no seat %q on this manager (see cotal ps)", a.Name)
	}
	info := s.snapshot()
	if !who.operator && info.Spawner != who.p.String() && !(who.p.Owner == protocol.OwnerLocal && who.p.Actor == info.Name) {
		return protocol.SeatInfo{}, refuse(codeDenied, "%s may not stop %s: it did not spawn it (spawned by %s)", who.p, info.Name, info.Spawner)
	}
	s.stop(a.Force, m.StopGrace)
	info = s.snapshot()
	info.Mesh = m.meshState(info.Name)
	return info, nil
}

// input types bytes into a seat's terminal.
func (m *Manager) input(a protocol.InputArgs) (map[string]int, error) {
	s := m.seat(a.Name)
	if s == nil {
		return nil, refuse(codeNotFound, "no seat %q on this manager (see cotal ps)", a.Name)
	}
	n, err := s.write(a.Data)
	if err != nil {
		return nil, err
	}
	return map[string]int{"bytes": n}, nil
}

// attach opens, renews or closes an attach session on the seat's terminal.
func (m *Manager) attach(a protocol.AttachArgs, reply string) (protocol.AttachResult, error) {
	s := m.seat(a.Name)
	if s == nil {
		return protocol.AttachResult{}, refuse(codeNotFound, "no seat %q on this manager (see cotal ps)", a.Name)
	}
	if !protocol.ValidToken(a.Session) || (!a.Renew && !a.Detach && (reply == "" || !strings.HasSuffix(reply, "."+a.Session))) {
		return protocol.AttachResult{}, refuse(codeBad, "attach: the session %q must be the reply subject's last token", a.Session)
	}
	return s.attach(a, reply)
}

// personaFor loads the persona a spawn names ("" is $COTAL_DEFAULT_PERSONA, else default).
func (m *Manager) personaFor(name string) (*workspace.Persona, error) {
	if name == "" && m.Getenv != nil {
		name = m.Getenv("COTAL_DEFAULT_PERSONA")
	}
	if name == "" {
		name = "default"
	}
	if err := workspace.CheckPersonaName(name); err != nil {
		return nil, refuse(codeBad, "persona %v", err)
	}
	per, err := m.Project.Persona(name)
	if errors.Is(err, workspace.ErrNoPersona) {
		return nil, refuse(codeNotFound, "persona %q: there is no %s (cotal personas new %s --prompt '...')", name, m.Project.PersonaPath(name), name)
	}
	return per, err
}

// heldNames are the actors of owner local with a DM durable in the space
// (dm_local-<actor>-<uid>): identities that were held here, though their peer may have
// left the roster long ago. It fails closed: a name it cannot check is not given.
func (m *Manager) heldNames() (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	names, err := m.ep.DMDurableNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the DM inboxes of space %s, to check the name is free: %w", m.Space, err)
	}
	held := map[string]bool{}
	for _, c := range names {
		// dm_<owner>-<actor>-<uid>: no token holds a dash, so the actor is the middle
		// one; the name must be exactly that actor's durable prefix.
		t := strings.Split(c, "-")
		if len(t) != 3 {
			continue
		}
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: t[1]}
		if strings.HasPrefix(c, protocol.ConsumerDMPrefix(p)) && p.Validate() == nil {
			held[p.Actor] = true
		}
	}
	return held, nil
}
