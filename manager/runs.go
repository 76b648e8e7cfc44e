package manager

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentrun"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
)

// Run hosting: the manager drives workflow runs (package rundriver) on its own
// connection, performs their seat effects (spawn, turn, ask) on the seats it runs, and at
// its start takes back every run its endpoint records as running, each under the next
// epoch and fencing token, so the driver that held it before is superseded and stops.

// ErrRunDriven refuses a second drive of a run this manager already drives.
var ErrRunDriven = errors.New("run is already driven by this manager")

// runHost is the manager's hold on the runs it drives and the turns they handed seats.
type runHost struct {
	m  *Manager
	js jetstream.JetStream

	mu      sync.Mutex
	drives  map[string]*hostedDrive // by run id
	goals   map[string]*goal        // by goal id
	spawned map[string]string       // spawn request id -> seat name
}

// hostedDrive is one run being driven here.
type hostedDrive struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    rundriver.Outcome
	err    error
}

// goal is one turn a run handed a seat, held until the seat yields it.
type goal struct {
	run, step, agent, payload string
	accepted, deadline        int64
	ask                       *rundriver.AskTurn
	done                      chan struct{}
	res                       rundriver.TurnResult
	state                     string // "" while pending; succeeded, cancelled, expired
}

func (m *Manager) runs() *runHost {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.host
}

// hostRuns opens run hosting and takes back every running run of the endpoint. A
// manager whose connection may not reach the run stores hosts no runs, and says so.
func (m *Manager) hostRuns(ctx context.Context) {
	js := m.ep.JetStream()
	if m.RunStore != nil {
		var err error
		if js, err = m.RunStore(ctx); err != nil {
			m.log.Warn("workflow runs are not hosted: run store", "err", err)
			return
		}
	}
	// The records bucket answers first: a manager that cannot reach it accepts no run.
	recs, err := runstore.OpenRecords(ctx, js, m.Space)
	if err != nil {
		m.log.Warn("workflow runs are not hosted: records bucket", "err", err)
		return
	}
	h := &runHost{m: m, js: js, drives: map[string]*hostedDrive{}, goals: map[string]*goal{}, spawned: map[string]string{}}
	m.mu.Lock()
	m.host = h
	m.mu.Unlock()
	keys, err := recs.KV.ListKeysFiltered(ctx, "run."+runstore.DefaultEndpoint+".*.status")
	if err != nil {
		m.log.Warn("workflow runs: list the run records", "err", err)
		return
	}
	for k := range keys.Keys() {
		run := strings.TrimSuffix(strings.TrimPrefix(k, "run."+runstore.DefaultEndpoint+"."), ".status")
		var st runstore.RunStatus
		if _, err := recs.Get(ctx, k, &st); err != nil || st.State != runstore.StateRunning {
			continue
		}
		if why := h.revoked(ctx, run); why != "" {
			m.log.Warn("workflow run stays parked", "run", run, "why", why)
			continue
		}
		if err := m.ResumeRun(run); err != nil {
			m.log.Warn("workflow run not taken back", "run", run, "err", err)
			continue
		}
		m.log.Info("workflow run taken back", "run", run, "epoch", st.Epoch+1)
	}
}

// admit files the admission of a run started here, before it is driven, as the
// reference's host does: create-only, for the caller that asked (who, with its lifecycle
// uid), under no channel (a hosted run performs no channel effect yet). Its provenance is
// the operator's: the caller is the operator this manager runs for, and no issued
// authority is snapshotted.
func (h *runHost) admit(ctx context.Context, run string, who protocol.Principal, uid string) error {
	adm, err := runstore.OpenAdmissions(ctx, h.js, h.m.Space)
	if err != nil {
		return err
	}
	none := runstore.ChannelAllow(nil, nil)
	return adm.Admit(ctx, runstore.Admission{Version: 1, Space: h.m.Space, Endpoint: runstore.DefaultEndpoint, RunID: run,
		InstanceID: h.m.instanceID, Caller: runstore.Caller{Owner: who.Owner, Actor: who.Actor, UID: uid},
		Ceiling:    runstore.Ceiling{Publish: none, Subscribe: none},
		Provenance: runstore.Provenance{Kind: "operator", By: who.String(), Reason: "run-start on the manager"},
		AdmittedAt: time.Now().UnixMilli()})
}

// revoked says why run may not be driven on: revoked (by whom, why), or its marker
// unreadable, which may say so; "" when it may.
func (h *runHost) revoked(ctx context.Context, run string) string {
	adm, err := runstore.OpenAdmissions(ctx, h.js, h.m.Space)
	if err != nil {
		return "its revocation marker cannot be read: " + err.Error()
	}
	rv, err := adm.Revoked(ctx, runstore.DefaultEndpoint, run)
	if err != nil {
		return "its revocation marker cannot be read: " + err.Error()
	}
	if rv != nil {
		return fmt.Sprintf("revoked by %s (%s)", rv.By, rv.Reason)
	}
	return ""
}

// config is the driver configuration of a run hosted here.
func (h *runHost) config() rundriver.Config {
	cfg := rundriver.Config{JS: h.js, Space: h.m.Space, Logger: h.m.log, Seats: h, LeaveRunning: true,
		Log: func(scope, line string) { h.m.log.Info("workflow run log", "scope", scope, "line", line) }}
	if h.m.RunConfig != nil {
		h.m.RunConfig(&cfg)
	}
	return cfg
}

// holder is the holder id of one attempt to drive a run here, as the reference's host
// forms it: this manager process, a dot, and the attempt's takeover id (16 hex), so two
// attempts never present the same holder to the journal's activation barrier.
func (h *runHost) holder() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return h.m.instance + "." + hex.EncodeToString(b[:])
}

// launch drives one run on its own goroutine until it ends or the manager stops.
func (h *runHost) launch(run string, drive func(ctx context.Context, cfg rundriver.Config) (rundriver.Outcome, error)) error {
	h.mu.Lock()
	if d, ok := h.drives[run]; ok {
		select {
		case <-d.done:
		default:
			h.mu.Unlock()
			return fmt.Errorf("drive run %s: %w", run, ErrRunDriven)
		}
	}
	ctx, cancel := context.WithCancel(h.m.ctx)
	d := &hostedDrive{cancel: cancel, done: make(chan struct{})}
	h.drives[run] = d
	h.mu.Unlock()
	h.m.wg.Add(1)
	go func() {
		defer h.m.wg.Done()
		defer close(d.done)
		defer cancel()
		cfg := h.config()
		if cfg.Holder == "" {
			cfg.Holder = h.holder()
		}
		d.out, d.err = drive(ctx, cfg)
		h.m.log.Info("workflow run drive ended", "run", run, "state", d.out.State, "err", d.err, "why", d.out.Err)
	}()
	return nil
}

// StartRun validates source, mints a run id and drives the new run here.
func (m *Manager) StartRun(source, file string) (string, error) {
	h := m.runs()
	if h == nil {
		return "", errors.New("start run: this manager hosts no runs (its run store is not open)")
	}
	prog, run, err := rundriver.Prepare(source)
	if err != nil {
		return "", err
	}
	return run, h.launch(run, func(ctx context.Context, cfg rundriver.Config) (rundriver.Outcome, error) {
		return rundriver.Start(ctx, cfg, prog, run, file)
	})
}

// ResumeRun takes a recorded run over (epoch and fencing token +1) and drives it here.
func (m *Manager) ResumeRun(run string) error {
	h := m.runs()
	if h == nil {
		return errors.New("resume run: this manager hosts no runs (its run store is not open)")
	}
	if err := runstore.CheckID("run id", run); err != nil {
		return err
	}
	return h.launch(run, func(ctx context.Context, cfg rundriver.Config) (rundriver.Outcome, error) {
		return rundriver.Resume(ctx, cfg, run)
	})
}

// WaitRun waits until the drive of run here ends and answers how it ended.
func (m *Manager) WaitRun(ctx context.Context, run string) (rundriver.Outcome, error) {
	h := m.runs()
	if h == nil {
		return rundriver.Outcome{}, errors.New("this manager hosts no runs")
	}
	h.mu.Lock()
	d, ok := h.drives[run]
	h.mu.Unlock()
	if !ok {
		return rundriver.Outcome{}, fmt.Errorf("run %s is not driven by this manager", run)
	}
	select {
	case <-d.done:
		return d.out, d.err
	case <-ctx.Done():
		return rundriver.Outcome{}, ctx.Err()
	}
}

// runCaller is the principal a run's seats are spawned under.
func runCaller(run string) protocol.Principal {
	return protocol.Principal{Owner: protocol.OwnerLocal, Actor: rundriver.RunCaller(run)}
}

// seatName is the name a run's spawn gives its seat: the persona and a digest of the
// spawn's request id, so a spawn performed again finds the seat the first one started.
func seatName(persona, requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	base := persona
	if len(base) > protocol.MaxActorLength-9 {
		base = base[:protocol.MaxActorLength-9]
	}
	return base + "_" + hex.EncodeToString(sum[:4])
}

func seatRefused(format string, args ...any) *lang.EffectError {
	return &lang.EffectError{Code: "L4002", Kind: "agent-unavailable", Message: fmt.Sprintf(format, args...)}
}

// Spawn brings a run's seat in: the persona file fixes how it runs (harness, program,
// channels, role); the program may name the persona and a model, nothing else. A
// persona whose harness is the command connector is refused: that runs a program only
// the operator names on the command line.
func (h *runHost) Spawn(ctx context.Context, r rundriver.SpawnRequest) (rundriver.Handle, error) {
	m := h.m
	per, err := m.personaFor(r.Persona)
	if err != nil || r.Persona == "" {
		return rundriver.Handle{}, seatRefused("spawn %q: no persona of that name in the project (.cotal/agents/)", r.Persona)
	}
	agent, from := agentrun.PickAgent("", per, m.Getenv)
	if con, ok := connector.Lookup(agent); !ok || con.Name == commandConnector {
		return rundriver.Handle{}, seatRefused("spawn %q: %s is not a harness a run may start (the command connector runs a program only the operator names)", r.Persona, from)
	}
	if r.Model != "" && !protocol.ValidToken(strings.ReplaceAll(strings.ReplaceAll(r.Model, ".", "_"), "/", "_")) {
		return rundriver.Handle{}, seatRefused("spawn %q: model %q is not a model name", r.Persona, r.Model)
	}
	h.mu.Lock()
	name, ok := h.spawned[r.RequestID]
	h.mu.Unlock()
	if !ok {
		name = seatName(per.Name, r.RequestID)
	}
	handle := rundriver.Handle{Agent: name, Persona: per.Name, Role: per.Role}
	if st := m.seat(name); st != nil {
		if st.snapshot().Spawner != runCaller(r.Run).String() {
			return rundriver.Handle{}, seatRefused("spawn %q: seat %s is not this run's", r.Persona, name)
		}
		return handle, h.settled(ctx, st)
	}
	res, err := m.spawn(caller{p: runCaller(r.Run), rail: protocol.ServiceManager, operator: true},
		protocol.SpawnArgs{Persona: per.Name, Name: name, Model: r.Model})
	if err != nil {
		return rundriver.Handle{}, seatRefused("spawn %q: %v", r.Persona, err)
	}
	h.mu.Lock()
	h.spawned[r.RequestID] = res.Name
	h.mu.Unlock()
	handle.Agent = res.Name
	st := m.seat(res.Name)
	if st == nil {
		return rundriver.Handle{}, seatRefused("spawn %q: seat %s is gone", r.Persona, res.Name)
	}
	return handle, h.settled(ctx, st)
}

// settled waits for a seat's spawn to settle and refuses one that failed.
func (h *runHost) settled(ctx context.Context, st *seat) error {
	select {
	case <-st.settled:
	case <-ctx.Done():
		return ctx.Err()
	}
	if info := st.snapshot(); info.Outcome == protocol.SettleFailed {
		return seatRefused("seat %s failed to start: %s", info.Name, strings.TrimSpace(info.LogTail))
	}
	return nil
}

// Turn hands a run's seat one turn and waits for its yield. The seat is told by a direct
// message that a turn waits (it reads it with turn-pending and ends it with turn-yield,
// the cotal_yield tool), once across the managers that host the run (tell); a goal
// handed before (a resumed step) is waited on again.
func (h *runHost) Turn(ctx context.Context, r rundriver.TurnRequest) (rundriver.TurnResult, error) {
	m := h.m
	st := m.seat(r.Agent)
	if st == nil || st.snapshot().Spawner != runCaller(r.Run).String() {
		return rundriver.TurnResult{}, seatRefused("turn %s: %s is no seat this run spawned on this manager", r.Step, r.Agent)
	}
	if !st.running() {
		return rundriver.TurnResult{}, seatRefused("turn %s: seat %s has ended", r.Step, r.Agent)
	}
	h.mu.Lock()
	g, ok := h.goals[r.GoalID]
	if !ok {
		g = &goal{run: r.Run, step: r.Step, agent: r.Agent, payload: r.Payload, accepted: time.Now().UnixMilli(),
			deadline: r.Deadline, ask: r.Ask, done: make(chan struct{})}
		h.goals[r.GoalID] = g
	}
	h.mu.Unlock()
	if !ok {
		// A turn the seat ended before a manager of this run was killed is not handed
		// again. Read once the goal is held here, so a yield yieldTold records meanwhile
		// is seen either here or by yieldTold, which then ends the goal.
		res, done, err := h.endedBefore(ctx, r)
		if err != nil {
			h.mu.Lock()
			delete(h.goals, r.GoalID)
			h.mu.Unlock()
			return res, err
		}
		if done {
			h.end(r.GoalID, "succeeded", res)
			return res, nil
		}
		h.tell(ctx, r)
	}
	left := time.Until(time.UnixMilli(g.deadline))
	timer := time.NewTimer(max(left, 0))
	defer timer.Stop()
	select {
	case <-g.done:
	case <-timer.C:
		h.end(r.GoalID, "expired", rundriver.TurnResult{})
	case <-ctx.Done():
		return rundriver.TurnResult{}, ctx.Err()
	}
	h.mu.Lock()
	state, res := g.state, g.res
	h.mu.Unlock()
	switch state {
	case "succeeded":
		return res, nil
	case "expired":
		return rundriver.TurnResult{}, &lang.EffectError{Code: "L4003", Kind: "deadline", Message: "turn " + r.Step + " was not yielded before its deadline"}
	}
	return rundriver.TurnResult{}, &lang.EffectError{Code: "L4002", Kind: "cancelled", Message: "turn " + r.Step + " was withdrawn"}
}

// tell sends the seat the direct message that a turn waits, once across the managers
// that host the run. A manager that takes the run back hands the still pending turn
// again under its goal id; the told record (toldKey), written once the notice is
// stored, keeps it from telling the seat a second time. A manager killed before the
// notice was stored left no record, so the next one tells it. Killed between the two
// writes, the next one sends the notice again under the same message id (noticeID): the
// DM stream drops it as a duplicate within its window, a receiver that dedupes by id
// after. A record that cannot be read does not stop the notice: told twice is better
// than never.
func (h *runHost) tell(ctx context.Context, r rundriver.TurnRequest) {
	m := h.m
	if m.TurnNotice != nil {
		m.TurnNotice(r.GoalID, false)
	}
	seat := protocol.Principal{Owner: protocol.OwnerLocal, Actor: r.Agent}
	key := toldKey(runstore.DefaultEndpoint, r.GoalID)
	recs, err := runstore.OpenRecords(ctx, h.js, m.Space)
	if err == nil {
		var t toldRecord
		switch _, err = recs.Get(ctx, key, &t); {
		case err == nil && t.Run == r.Run && t.Seat == seat.String():
			m.log.Info("turn notice sent before, not sent again", "seat", r.Agent, "goal", r.GoalID, "msg", t.MsgID)
			return
		case err == nil:
			m.log.Warn("turn notice record names another run or seat; telling the seat", "key", key, "run", t.Run, "seat", t.Seat)
		case !errors.Is(err, runstore.ErrNoRecord):
			m.log.Warn("turn notice record unreadable; telling the seat", "key", key, "err", err)
		}
	} else {
		m.log.Warn("turn notice record", "goal", r.GoalID, "err", err)
	}
	note := client.Text(fmt.Sprintf("A workflow run handed you a turn; end it with cotal_yield.\n\n%s", r.Payload))
	note.ID = noticeID(r.GoalID)
	sent, err := m.ep.DM(ctx, seat, note)
	if err != nil {
		m.log.Warn("turn notice", "seat", r.Agent, "goal", r.GoalID, "err", err)
		return
	}
	if sent.Duplicate {
		m.log.Info("turn notice was stored before, by a manager since gone; not stored again", "seat", r.Agent, "goal", r.GoalID, "msg", sent.ID)
	}
	if m.TurnNotice != nil {
		m.TurnNotice(r.GoalID, true)
	}
	if recs == nil {
		return
	}
	rec := toldRecord{V: 1, GoalID: r.GoalID, Run: r.Run, Step: r.Step, Seat: seat.String(), MsgID: sent.ID,
		DeadlineAt: r.Deadline, At: time.Now().UnixMilli()}
	if r.Ask != nil {
		rec.Ask = &toldAsk{Endpoint: r.Ask.Endpoint, Token: r.Ask.Token, Schema: r.Ask.Schema}
	}
	if err := recs.Create(ctx, key, rec); err != nil && !errors.Is(err, runstore.ErrConflict) {
		m.log.Warn("turn notice record", "key", key, "err", err)
	}
}

// toldRecord says a seat was told that a run's turn waits: filed create-only in the
// records bucket at toldKey once the notice is stored, so a manager that takes the run
// back does not tell the seat again, and takes the seat's yield of it before its drive
// hands the turn again (yieldTold). A Go extension (docs/interop.md).
type toldRecord struct {
	V          int      `json:"v"`
	GoalID     string   `json:"goalId"`
	Run        string   `json:"run"`
	Step       string   `json:"step"`
	Seat       string   `json:"seat"` // <owner>.<actor>
	MsgID      string   `json:"msgId"`
	DeadlineAt int64    `json:"deadlineAt"`
	Ask        *toldAsk `json:"ask,omitempty"`
	At         int64    `json:"at"`
}

// toldAsk is the answer an ask's turn waits for (rundriver.AskTurn).
type toldAsk struct {
	Endpoint string         `json:"endpoint"`
	Token    string         `json:"token"`
	Schema   map[string]any `json:"schema"`
}

// toldKey is where the notice of goal is recorded.
func toldKey(endpoint, goalID string) string { return "told." + endpoint + "." + goalID }

// noticeID is the message id of the notice of goal: a UUID (version 8, RFC 9562) of the
// first 16 bytes of SHA-256("cotal-turn-notice:" + goal), so each manager that sends it
// sends the same id.
func noticeID(goalID string) string {
	sum := sha256.Sum256([]byte("cotal-turn-notice:" + goalID))
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

// yieldRecord is a seat's yield of a run's turn, filed create-only in the records bucket
// at yieldKey before the turn ends: the manager that takes the run back after a crash
// answers the step from it instead of handing the seat the turn again. A Go extension
// (docs/interop.md).
type yieldRecord struct {
	V      int    `json:"v"`
	GoalID string `json:"goalId"`
	Run    string `json:"run"`
	Step   string `json:"step"`
	By     string `json:"by"`
	Status string `json:"status"`
	To     string `json:"to,omitempty"`
	Note   string `json:"note,omitempty"`
	At     int64  `json:"at"`
}

// yieldKey is where the yield of goal is recorded.
func yieldKey(endpoint, goalID string) string { return "yield." + endpoint + "." + goalID }

// endedBefore answers how a turn ended when its seat ended it before (a yield recorded,
// or for an ask an answer filed under its token), as a manager now gone saw it; done
// is false when the turn is still to be handed.
func (h *runHost) endedBefore(ctx context.Context, r rundriver.TurnRequest) (rundriver.TurnResult, bool, error) {
	recs, err := runstore.OpenRecords(ctx, h.js, h.m.Space)
	if err != nil {
		return rundriver.TurnResult{}, false, fmt.Errorf("turn %s: %w", r.Step, err)
	}
	var y yieldRecord
	_, err = recs.Get(ctx, yieldKey(runstore.DefaultEndpoint, r.GoalID), &y)
	switch {
	case err == nil && (y.Run != r.Run || y.By != (protocol.Principal{Owner: protocol.OwnerLocal, Actor: r.Agent}).String()):
		return rundriver.TurnResult{}, false, fmt.Errorf("turn %s: the yield recorded for goal %s is run %s's by %s", r.Step, r.GoalID, y.Run, y.By)
	case err == nil:
		return rundriver.TurnResult{Status: y.Status, To: y.To, Note: y.Note, At: y.At}, true, nil
	case !errors.Is(err, runstore.ErrNoRecord):
		return rundriver.TurnResult{}, false, fmt.Errorf("turn %s: %w", r.Step, err)
	}
	if r.Ask == nil {
		return rundriver.TurnResult{}, false, nil
	}
	answers, err := recs.Answers(ctx, r.Ask.Endpoint, r.Ask.Token)
	if err != nil {
		return rundriver.TurnResult{}, false, fmt.Errorf("turn %s: %w", r.Step, err)
	}
	for _, a := range answers {
		if a.Supersedes == "" {
			return rundriver.TurnResult{Status: "done", At: a.At}, true, nil
		}
	}
	return rundriver.TurnResult{}, false, nil
}

// Down waits until a seat of the run has ended.
func (h *runHost) Down(ctx context.Context, run, agent string) (int64, error) {
	st := h.m.seat(agent)
	if st == nil || st.snapshot().Spawner != runCaller(run).String() {
		return 0, seatRefused("wait(down(%s)): no seat this run spawned on this manager", agent)
	}
	select {
	case <-st.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if info := st.snapshot(); info.Ended > 0 {
		return info.Ended, nil
	}
	return time.Now().UnixMilli(), nil
}

// Cancel withdraws a pending turn.
func (h *runHost) Cancel(_, goalID string) { h.end(goalID, "cancelled", rundriver.TurnResult{}) }

// end settles a pending goal once; it reports whether this call settled it.
func (h *runHost) end(goalID, state string, res rundriver.TurnResult) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.goals[goalID]
	if !ok || g.state != "" {
		return false
	}
	g.state, g.res = state, res
	close(g.done)
	return true
}

// turnPending lists the caller's own pending turns.
func (m *Manager) turnPending(who caller) (mgrclient.TurnPendingResult, error) {
	out := mgrclient.TurnPendingResult{Turns: []mgrclient.PendingTurn{}}
	h := m.runs()
	if h == nil || who.p.Owner != protocol.OwnerLocal {
		return out, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, g := range h.goals {
		if g.agent != who.p.Actor || g.state != "" {
			continue
		}
		t := mgrclient.PendingTurn{GoalID: id, Payload: g.payload, AcceptedAt: g.accepted, DeadlineAt: g.deadline}
		if g.ask != nil {
			t.Ask = g.ask.Schema
		}
		out.Turns = append(out.Turns, t)
	}
	return out, nil
}

// turnYield ends one of the caller's own turns. An ask's turn ends done only with a
// value that conforms to its schema, which is filed first as the ask's answer record (by
// the seat), so the run reads the same answer whoever relays it.
func (m *Manager) turnYield(ctx context.Context, who caller, a mgrclient.TurnYieldArgs) (mgrclient.TurnYieldResult, error) {
	h := m.runs()
	if h == nil {
		return mgrclient.TurnYieldResult{}, refuse(codeNotFound, "no turn %q: this manager drives no runs", a.GoalID)
	}
	switch a.Status {
	case "done", "blocked", "handoff":
	default:
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "status %q: want done, blocked or handoff", a.Status)
	}
	if a.Status == "handoff" && a.To == "" {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "a handoff names the seat it hands to (to)")
	}
	if err := runstore.CheckID("goalId", a.GoalID); err != nil {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "%v (turn-pending lists your turns' ids)", err)
	}
	if len([]rune(a.Note)) > mgrclient.MaxYieldNote {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "note: at most %d characters", mgrclient.MaxYieldNote)
	}
	h.mu.Lock()
	g, ok := h.goals[a.GoalID]
	var state string
	if ok {
		state = g.state
	}
	h.mu.Unlock()
	if !ok && who.p.Owner == protocol.OwnerLocal {
		return h.yieldTold(ctx, who, a)
	}
	if !ok || g.agent != who.p.Actor || who.p.Owner != protocol.OwnerLocal {
		return mgrclient.TurnYieldResult{}, refuse(codeNotFound, "you hold no turn %q (turn-pending lists yours)", a.GoalID)
	}
	if state != "" {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "turn %s is already %s (its deadline was %s)", a.GoalID, state, time.UnixMilli(g.deadline).UTC().Format(time.RFC3339))
	}
	res, err := h.fileYield(ctx, who, a, g)
	if err != nil {
		return mgrclient.TurnYieldResult{}, err
	}
	if !h.end(a.GoalID, "succeeded", res) {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "turn %s was settled meanwhile", a.GoalID)
	}
	return mgrclient.TurnYieldResult{GoalID: a.GoalID, State: "succeeded"}, nil
}

// fileYield checks the caller's yield a of goal g against what the turn asks (a handoff
// to a seat of the run, a value only for an ask, and one that fits its schema), files an
// ask's answer, and records the yield (recordYield), returning the result that ends the
// turn.
func (h *runHost) fileYield(ctx context.Context, who caller, a mgrclient.TurnYieldArgs, g *goal) (rundriver.TurnResult, error) {
	if a.Status == "handoff" {
		if st := h.m.seat(a.To); st == nil || st.snapshot().Spawner != runCaller(g.run).String() {
			return rundriver.TurnResult{}, refuse(codeBad, "handoff to %q: hand off only to a seat this run spawned", a.To)
		}
	}
	if len(a.Value) > 0 && g.ask == nil {
		return rundriver.TurnResult{}, refuse(codeBad, "turn %s asks for no value: yield it with a status (and a note) only", a.GoalID)
	}
	if g.ask != nil && a.Status == "done" {
		if len(a.Value) == 0 {
			return rundriver.TurnResult{}, refuse(codeBad, "turn %s is an ask: yield done with value, a record %v", a.GoalID, g.ask.Schema)
		}
		var v any
		if err := json.Unmarshal(a.Value, &v); err != nil {
			return rundriver.TurnResult{}, refuse(codeBad, "value: %v", err)
		}
		if why := rundriver.CheckAnswer(g.ask.Schema, v); why != "" {
			return rundriver.TurnResult{}, refuse(codeBad, "value: %s", why)
		}
		if err := h.fileAnswer(ctx, g.ask, who.p.String(), v, a.Value); err != nil {
			return rundriver.TurnResult{}, err
		}
	}
	res := rundriver.TurnResult{Status: a.Status, To: a.To, Note: a.Note, At: time.Now().UnixMilli()}
	return h.recordYield(ctx, g, a.GoalID, who.p.String(), res)
}

// yieldTold ends a turn this manager does not hold: one a manager since gone told the
// caller of, which this one has not handed again yet (its run's drive has not reached the
// step after the takeover). The seat is not told the turn again, so its yield is taken
// here, from the told record, as the turn's would be: the yield is recorded (and an
// ask's answer filed), and the drive answers the step from the record when it reaches
// it (Turn reads it once the goal is held, and a goal held meanwhile is ended here).
func (h *runHost) yieldTold(ctx context.Context, who caller, a mgrclient.TurnYieldArgs) (mgrclient.TurnYieldResult, error) {
	notFound := refuse(codeNotFound, "you hold no turn %q (turn-pending lists yours)", a.GoalID)
	recs, err := runstore.OpenRecords(ctx, h.js, h.m.Space)
	if err != nil {
		return mgrclient.TurnYieldResult{}, err
	}
	var t toldRecord
	if _, err := recs.Get(ctx, toldKey(runstore.DefaultEndpoint, a.GoalID), &t); errors.Is(err, runstore.ErrNoRecord) {
		return mgrclient.TurnYieldResult{}, notFound
	} else if err != nil {
		return mgrclient.TurnYieldResult{}, err
	}
	if t.Seat != who.p.String() {
		return mgrclient.TurnYieldResult{}, notFound
	}
	if now := time.Now().UnixMilli(); now >= t.DeadlineAt {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "turn %s is already expired (its deadline was %s)", a.GoalID, time.UnixMilli(t.DeadlineAt).UTC().Format(time.RFC3339))
	}
	if why, err := h.withdrawn(ctx, recs, a.GoalID, who, t); err != nil {
		return mgrclient.TurnYieldResult{}, err
	} else if why != "" {
		return mgrclient.TurnYieldResult{}, refuse(codeBad, "turn %s was withdrawn: %s", a.GoalID, why)
	}
	g := &goal{run: t.Run, step: t.Step, agent: who.p.Actor, deadline: t.DeadlineAt}
	if t.Ask != nil {
		g.ask = &rundriver.AskTurn{Endpoint: t.Ask.Endpoint, Token: t.Ask.Token, Schema: t.Ask.Schema}
	}
	res, err := h.fileYield(ctx, who, a, g)
	if err != nil {
		return mgrclient.TurnYieldResult{}, err
	}
	h.end(a.GoalID, "succeeded", res)
	h.m.log.Info("turn yielded before its drive handed it again", "seat", who.p.Actor, "goal", a.GoalID, "run", t.Run, "step", t.Step)
	return mgrclient.TurnYieldResult{GoalID: a.GoalID, State: "succeeded"}, nil
}

// withdrawn says why a turn known only from its told record t can no longer be yielded
// ("" when it can): its run has ended, its step is settled in the run's journal (a drive
// since the takeover settled it otherwise), or the step waits on another goal now (an
// ask's later attempt). A yield the caller recorded for the goal already is a retry,
// never withdrawn: recordYield answers it as it was.
func (h *runHost) withdrawn(ctx context.Context, recs *runstore.Records, goalID string, who caller, t toldRecord) (string, error) {
	var y yieldRecord
	if _, err := recs.Get(ctx, yieldKey(runstore.DefaultEndpoint, goalID), &y); err == nil && y.Run == t.Run && y.By == who.p.String() {
		return "", nil
	} else if err != nil && !errors.Is(err, runstore.ErrNoRecord) {
		return "", fmt.Errorf("turn %s: %w", goalID, err)
	}
	var st runstore.RunStatus
	if _, err := recs.Get(ctx, runstore.RunStatusKey(runstore.DefaultEndpoint, t.Run), &st); err != nil && !errors.Is(err, runstore.ErrNoRecord) {
		return "", fmt.Errorf("turn %s: run %s: %w", goalID, t.Run, err)
	}
	if st.State == runstore.StateCompleted || st.State == runstore.StateFailed {
		return fmt.Sprintf("run %s has %s", t.Run, st.State), nil
	}
	journal, _, err := runstore.Replay(ctx, h.js, h.m.Space, t.Run)
	if err != nil {
		return "", fmt.Errorf("turn %s: run %s: %w", goalID, t.Run, err)
	}
	var last *runstore.Entry // the step's newest record
	for _, r := range journal {
		if e := r.Entry; e != nil && e.Key() == t.Step {
			last = e
		}
	}
	if last == nil {
		return "", nil
	}
	if last.State != "pending" {
		return fmt.Sprintf("run %s settled its step %s %s", t.Run, t.Step, last.Status), nil
	}
	// An ask's next attempt binds its own goal on the step: the drive waits on that one.
	var bound struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(last.External, &bound) == nil && bound.Token != "" && bound.Token != goalID {
		return fmt.Sprintf("run %s moved its step %s on to a later attempt (turn-pending lists it once handed)", t.Run, t.Step), nil
	}
	return "", nil
}

// recordYield files the yield of a turn before it ends, create-only: the yield stands
// for the step even if this manager dies before the run settles it. A yield of the goal
// recorded already (a retry whose first write landed unanswered) is the one that ends it.
func (h *runHost) recordYield(ctx context.Context, g *goal, goalID, by string, res rundriver.TurnResult) (rundriver.TurnResult, error) {
	recs, err := runstore.OpenRecords(ctx, h.js, h.m.Space)
	if err != nil {
		return res, err
	}
	key := yieldKey(runstore.DefaultEndpoint, goalID)
	y := yieldRecord{V: 1, GoalID: goalID, Run: g.run, Step: g.step, By: by, Status: res.Status, To: res.To, Note: res.Note, At: res.At}
	err = recs.Create(ctx, key, y)
	if errors.Is(err, runstore.ErrConflict) {
		var was yieldRecord
		if _, gerr := recs.Get(ctx, key, &was); gerr == nil && was.Run == g.run && was.By == by {
			return rundriver.TurnResult{Status: was.Status, To: was.To, Note: was.Note, At: was.At}, nil
		}
	}
	if err != nil {
		return res, fmt.Errorf("record the yield of %s: %w", goalID, err)
	}
	return res, nil
}

// fileAnswer files an ask's answer record, create-only (a retry files the same record).
func (h *runHost) fileAnswer(ctx context.Context, ask *rundriver.AskTurn, by string, v any, raw json.RawMessage) error {
	recs, err := runstore.OpenRecords(ctx, h.js, h.m.Space)
	if err != nil {
		return err
	}
	id, err := runstore.AnswerID(ask.Token, by, v, "")
	if err != nil {
		return err
	}
	c, err := lang.Canonical(v)
	if err != nil {
		c = raw
	}
	ans := runstore.Answer{V: 1, Token: ask.Token, AnswerID: id, Value: c, By: by, At: time.Now().UnixMilli()}
	if err := recs.Create(ctx, runstore.AnswerKey(ask.Endpoint, ask.Token, id), ans); err != nil {
		return fmt.Errorf("file the answer of %s: %w", ask.Token, err)
	}
	return nil
}

// StopRun stops driving run here, as a host that stops does: the run stays recorded
// running, for a resume or the next start of a manager to take it back.
func (m *Manager) StopRun(run string) {
	h := m.runs()
	if h == nil {
		return
	}
	h.mu.Lock()
	d, ok := h.drives[run]
	h.mu.Unlock()
	if ok {
		d.cancel()
	}
}
