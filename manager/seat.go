package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/agentrun"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// seat is one agent the manager runs (or adopted).
type seat struct {
	m       *Manager
	persona *workspace.Persona
	spec    connector.Spec
	launch  connector.Launch
	program string
	args    protocol.SpawnArgs // what was asked, for a restart
	spawner caller
	release func() error // removes the run folder, the credential with it

	mu          sync.Mutex // guards the fields below and info
	info        protocol.SeatInfo
	proc        *os.Process
	start       string            // the process's start time (workspace.Record), "" if unknown
	ptmx        *os.File          // nil for an adopted seat
	adopted     *workspace.Record // the process of an adopted seat (not this manager's child); nil for one it started
	adoptedEnd  sync.Once         // records the end of an adopted seat's process
	screen      *screen
	sessions    map[string]*session
	stopping    bool
	cancelStart func()        // cancels the start; set once it began
	settled     chan struct{} // closed once the spawn settles
	done        chan struct{} // closed once the process has ended (or never started) and its files are gone
}

// session is one attach: terminal bytes go to its reply subject until it expires.
type session struct {
	subject string
	expires time.Time
}

func (s *seat) snapshot() protocol.SeatInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	if info.Outcome == protocol.SettleFailed || info.Process.Ended() {
		info.LogTail = s.screen.Tail(10)
	}
	return info
}

func (s *seat) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.info.Process.Ended()
}

func (s *seat) settle(outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info.Outcome != "" {
		return
	}
	s.info.Outcome = outcome
	close(s.settled)
}

// record is what a seat's run folder keeps for a manager that takes over.
type record struct {
	Info   protocol.SeatInfo `json:"info"`
	Start  string            `json:"start"` // the process's start time
	Remove []string          `json:"remove,omitempty"`
}

func seatFile(proj *workspace.Project, name string) string {
	return filepath.Join(agentrun.RunDir(proj, name), "seat.json")
}

func (s *seat) writeRecord(start string) error {
	b, err := json.Marshal(record{Info: s.snapshot(), Start: start, Remove: s.spec.Remove})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(seatFile(s.m.Project, s.info.Name), b, 0o600)
}

// spawn starts a seat and answers at once with its name and uid (with Wait, once it
// settles).
func (m *Manager) spawn(who caller, a protocol.SpawnArgs) (protocol.SpawnResult, error) {
	per, err := m.personaFor(a.Persona)
	if err != nil {
		return protocol.SpawnResult{}, err
	}
	if !who.operator {
		if err := m.checkAgentSpawn(who, a, per); err != nil {
			return protocol.SpawnResult{}, err
		}
	}
	agent, from := agentrun.PickAgent(a.Agent, per, m.Getenv)
	con, ok := connector.Lookup(agent)
	if !ok {
		return protocol.SpawnResult{}, refuse(codeBad, "%s: cotal has no connector of that name", from)
	}
	if !who.operator && con.Name == commandConnector {
		return protocol.SpawnResult{}, refuse(codeDenied, "%s may not spawn persona %s with %s: the command connector runs a program only the operator names (cotal spawn --detach %s --agent command -- <program>); pin a harness (claude, codex, opencode) in the persona", who.p, per.Name, from, per.Name)
	}
	if a.Name != "" && !protocol.ValidActor(a.Name) {
		return protocol.SpawnResult{}, refuse(codeBad, "name %q: want 1 to %d letters, digits or _", a.Name, protocol.MaxActorLength)
	}
	if a.Role != "" && !protocol.ValidToken(a.Role) {
		return protocol.SpawnResult{}, refuse(codeBad, "role %q: letters, digits, _ and - only", a.Role)
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = m.Project.Root
	}
	if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(m.Project.Root, cwd)
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return protocol.SpawnResult{}, refuse(codeBad, "cwd %s is not a folder on the manager's host", cwd)
	}

	// The name is one no one else holds or held in this space: an explicit one is
	// refused when it is, a persona-derived one gets _2, _3, ...
	held, err := m.heldNames()
	if err != nil {
		return protocol.SpawnResult{}, err
	}
	name := a.Name
	m.mu.Lock() // names are picked one spawn at a time
	if name != "" {
		if why := m.takenLocked(name, held); why != "" {
			m.mu.Unlock()
			return protocol.SpawnResult{}, refuse(codeExists, "name %s is taken: %s; a spawned agent never takes over an identity: pick another --name", name, why)
		}
	} else {
		base := per.Name
		name = base
		for i := 2; m.takenLocked(name, held) != ""; i++ {
			name = base + "_" + strconv.Itoa(i)
		}
	}
	s := &seat{m: m, persona: per, args: a, spawner: who, screen: newScreen(screenSize),
		sessions: map[string]*session{}, settled: make(chan struct{}), done: make(chan struct{})}
	s.info = protocol.SeatInfo{Name: name, Persona: per.Name, Agent: con.Name, Process: "starting",
		Spawner: who.p.String(), Cwd: cwd, Host: m.Host, Instance: m.instance}
	m.seats[name] = s // reserves the name
	m.mu.Unlock()

	if err := m.start(s, con, cwd); err != nil {
		m.mu.Lock()
		if m.seats[name] == s {
			delete(m.seats, name)
		}
		m.mu.Unlock()
		return protocol.SpawnResult{}, err
	}
	res := protocol.SpawnResult{Name: name, Persona: per.Name, Agent: con.Name, UID: s.snapshot().UID, WindowMs: m.Window.Milliseconds()}
	if a.Wait {
		select {
		case <-s.settled:
		case <-m.ctx.Done():
		}
		info := s.snapshot()
		res.Outcome, res.Code, res.LogTail = info.Outcome, info.Code, info.LogTail
	}
	return res, nil
}

// commandConnector is the connector that runs any program: the operator's alone.
const commandConnector = "command"

// checkAgentSpawn refuses what an agent's spawn request may not choose. A request from
// the mesh is data: an agent names a persona, and may name the seat, pick a harness the
// persona leaves open, a model and a first prompt. The program, its arguments, the folder
// and the role are the persona's (or the operator's), and the persona must stay within
// the spawner's own grant: what it reads, posts, may do and the role it serves.
func (m *Manager) checkAgentSpawn(who caller, a protocol.SpawnArgs, per *workspace.Persona) error {
	switch {
	case len(a.Args) > 0:
		return refuse(codeDenied, "%s may not pass arguments to a spawn (args %q): the persona (or the operator) fixes how its harness runs", who.p, a.Args)
	case a.Cwd != "":
		return refuse(codeDenied, "%s may not choose a spawn's folder (cwd %q): an agent's spawn runs in the project root", who.p, a.Cwd)
	case a.Role != "" && a.Role != per.Role:
		return refuse(codeDenied, "%s may not choose a spawn's role (role %q): the role is the persona's (%s serves %s)", who.p, a.Role, per.Name, orNone(per.Role))
	case a.Agent == commandConnector:
		return refuse(codeDenied, "%s may not spawn with agent command: it runs a program only the operator names; ask for a harness (claude, codex, opencode)", who.p)
	case a.Agent != "" && per.Agent != "" && a.Agent != per.Agent:
		return refuse(codeDenied, "%s may not run persona %s with %s: the persona pins %s", who.p, per.Name, a.Agent, per.Agent)
	case a.Model != "" && !validModel(a.Model):
		return refuse(codeBad, "model %q: want a model name of letters, digits and . _ - / : @, not starting with -", a.Model)
	}
	// An agent hands a teammate no more than its own grant (a persona file it could
	// write by other means is checked here, where the credential is minted).
	own := m.personaOf(who.p)
	if own == nil {
		return refuse(codeDenied, "%s may not spawn: it has no persona here", who.p)
	}
	if err := workspace.GrantOf(own).Covers(per); err != nil {
		return refuse(codeDenied, "%s may not spawn persona %s: %v (narrow the persona, or ask the operator: cotal spawn --detach %s)", who.p, per.Name, err, per.Name)
	}
	return nil
}

// validModel accepts a model name an agent may ask for: 1 to 128 of letters, digits and
// . _ - / : @, not starting with - (it reaches a harness as a value, never as an option).
func validModel(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._-/:@", r):
		default:
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "no role"
	}
	return s
}

// takenLocked says why name may not be given to a new seat ("" when it may), with m.mu
// held: it is the operator's or the manager's, a seat of this manager has or had it, a
// live launcher holds its run folder, the roster knows it (online or not), or a DM
// durable of it exists (held).
func (m *Manager) takenLocked(name string, held map[string]bool) string {
	switch {
	case name == m.Operator.Actor && m.Operator.Owner == protocol.OwnerLocal:
		return "it is the operator's"
	case m.ep != nil && name == m.ep.Principal().Actor:
		return "it is the manager's"
	case m.seats[name] != nil:
		return "a seat of this manager has or had it (see cotal ps)"
	case agentrun.Held(m.Project, name):
		return "an agent of that name runs from this project"
	case held[name]:
		return "an identity of that name has a DM inbox in this space"
	}
	if p, ok := m.presence[name]; ok {
		if p.Online {
			return "a peer of that name is online"
		}
		return "a peer of that name is in the roster (offline)"
	}
	return ""
}

// start prepares the seat's run (folder, credential, files) and starts it in a
// pseudo-terminal.
func (m *Manager) start(s *seat, con connector.Connector, cwd string) (err error) {
	sctx, endStart := s.beginStart(m.ctx)
	defer endStart()
	defer func() {
		if err != nil {
			s.startFailed()
		}
	}()
	a, per := s.args, s.persona
	l := agentrun.NewLaunch(agentrun.Target{Project: m.Project, Space: m.Space, Servers: m.Servers, Auth: m.Auth, Exe: m.Exe, Getenv: m.Getenv},
		per, agentrun.Overrides{Name: s.info.Name, Role: a.Role, Model: a.Model, Prompt: a.Prompt, HasPrompt: a.Prompt != "", Args: a.Args})
	if l.CredsPath != "" {
		// Every start gets a fresh lifecycle uid, so a fresh DM durable: a seat never
		// reads a DM that was waiting for an earlier holder of its name. It is chosen
		// before the spec is built, whose environment names it (COTAL_LIFECYCLE_UID).
		l.LifecycleUID = protocol.NewLifecycleUID()
	}
	spec, err := con.Build(l)
	if err != nil {
		return refuse(codeBad, "spawning %s with %s: %v", l.Name, con.Name, err)
	}
	look := m.LookPath
	if look == nil {
		look = exec.LookPath
	}
	program, err := look(spec.Command)
	if err != nil {
		return refuse(codeBad, "spawning %s: %s is not installed on the manager's host (%s)", l.Name, spec.Command, con.Install)
	}
	s.prepared(l, spec, program)

	release, err := agentrun.Claim(l.RunDir, l.Name, os.Getpid())
	if err != nil {
		var running *agentrun.ErrRunning
		if errors.As(err, &running) {
			return refuse(codeExists, "name %s is taken: %v", l.Name, err)
		}
		return err
	}
	s.release = release
	fail := func(err error) error {
		return errors.Join(err, agentrun.Cleanup(spec), release())
	}
	if l.CredsPath != "" {
		spec := agentrun.UserSpec(l, per) // for l.LifecycleUID
		ctx, cancel := context.WithTimeout(sctx, 30*time.Second)
		creds, err := m.Mint(ctx, spec)
		cancel()
		if err != nil {
			if sctx.Err() != nil && m.ctx.Err() == nil {
				return fail(s.stoppedWhileStarting())
			}
			return fail(fmt.Errorf("mint %s: %w", l.Name, err))
		}
		c, err := trust.ReadCreds(creds)
		if err != nil {
			return fail(fmt.Errorf("mint %s: %w", l.Name, err))
		}
		if c.LifecycleUID != spec.LifecycleUID {
			return fail(fmt.Errorf("mint %s: the credential names lifecycle uid %s, not the fresh %s asked for", l.Name, c.LifecycleUID, spec.LifecycleUID))
		}
		s.setUID(c.LifecycleUID)
		if err := atomicfile.WriteFile(l.CredsPath, creds, 0o600); err != nil {
			return fail(fmt.Errorf("write creds: %w", err))
		}
	}
	if err := agentrun.WriteFiles(spec); err != nil {
		return fail(err)
	}
	logDir := filepath.Join(m.Project.Dir(), "logs", "agents")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return fail(fmt.Errorf("log folder: %w", err))
	}
	logf, err := os.OpenFile(filepath.Join(logDir, l.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(fmt.Errorf("log: %w", err))
	}

	if sctx.Err() != nil {
		_ = logf.Close()
		return fail(s.stoppedWhileStarting())
	}
	cmd := exec.Command(program, spec.Args...)
	cmd.Env = agentrun.ChildEnv(m.Environ(), spec.Env)
	cmd.Dir = cwd
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		_ = logf.Close()
		return fail(refuse(codeBad, "start %s: %v", spec.Command, err))
	}
	var start string
	if rec, err := workspace.ProcessRecord(cmd.Process.Pid); err == nil {
		start = rec.Start
	}
	running := s.launched(cmd.Process, ptmx, start)
	// The run folder is held by the seat's process from now on, so it outlives this
	// manager exactly as long as the agent does.
	if err := workspace.WritePidfile(filepath.Join(l.RunDir, "spawn.pid"), cmd.Process.Pid); err != nil {
		m.log.Warn("seat pidfile", "seat", l.Name, "err", err)
	}
	if err := s.writeRecord(start); err != nil {
		m.log.Warn("seat record", "seat", l.Name, "err", err)
	}
	m.log.Info("seat started", "seat", l.Name, "persona", per.Name, "agent", s.info.Agent, "pid", cmd.Process.Pid, "spawner", s.info.Spawner)

	copied := make(chan struct{})
	m.wg.Add(3)
	go func() { defer m.wg.Done(); defer close(copied); s.pump(ptmx, logf) }()
	go func() {
		defer m.wg.Done()
		err := cmd.Wait()
		<-copied // the last output is in the log and the screen
		_ = logf.Close()
		s.exited(exitCode(err))
	}()
	go func() { defer m.wg.Done(); s.watchSettle() }()
	if !running {
		// A stop came while it started: end what was started; it ends as any seat does.
		s.signal(syscall.SIGKILL)
		return s.stoppedWhileStarting()
	}
	return nil
}

// stoppedWhileStarting is the answer to a spawn that a stop cancelled.
func (s *seat) stoppedWhileStarting() error {
	return refuse(protocol.MgrCodeStopped, "seat %s was stopped while it started", s.info.Name)
}

// exitCode is the process's exit code, 128+signal when a signal ended it.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// pump copies the terminal's output to the log, the screen and the attach sessions.
func (s *seat) pump(ptmx *os.File, logf io.Writer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := ptmx.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			_, _ = logf.Write(chunk)
			_, _ = s.screen.Write(chunk)
			s.broadcast(chunk, "out")
		}
		if err != nil {
			return // EIO once the process and its children have closed the terminal
		}
	}
}

// broadcast sends a terminal frame to every live attach session.
func (s *seat) broadcast(data []byte, kind string) {
	now := time.Now()
	s.mu.Lock()
	var subjects []string
	for id, ss := range s.sessions {
		if now.After(ss.expires) && kind != "exit" {
			delete(s.sessions, id)
			continue
		}
		subjects = append(subjects, ss.subject)
	}
	if kind == "exit" {
		s.sessions = map[string]*session{}
	}
	s.mu.Unlock()
	for _, subj := range subjects {
		msg := &nats.Msg{Subject: subj, Data: append([]byte(nil), data...), Header: nats.Header{}}
		msg.Header.Set(protocol.MgrTTYHeader, kind)
		if err := s.m.ep.Conn().PublishMsg(msg); err != nil {
			s.m.log.Debug("attach frame", "seat", s.info.Name, "err", err)
		}
	}
}

// watchSettle settles the spawn: succeeded once its presence is online, uncertain when
// the window passes first (failed is settled by exited).
func (s *seat) watchSettle() {
	window := time.NewTimer(s.m.Window)
	defer window.Stop()
	for {
		on, changed := s.m.online(s.info.Name)
		if on {
			s.settle(protocol.SettleSucceeded)
			return
		}
		select {
		case <-s.settled:
			return
		case <-changed:
		case <-window.C:
			s.settle(protocol.SettleUncertain)
			return
		case <-s.m.ctx.Done():
			return
		}
	}
}

// exited records the end of the seat's process, retires its credential and files, and
// restarts it when its persona says restart: on-failure and it failed on its own.
func (s *seat) exited(code int) {
	s.mu.Lock()
	s.moveLocked(protocol.SeatExited)
	s.info.Code, s.info.Ended = &code, time.Now().UnixMilli()
	stopping := s.stopping
	restarts := s.info.Restarts
	if s.ptmx != nil {
		_ = s.ptmx.Close()
	}
	s.mu.Unlock()
	s.m.prune() // before the settle a spawn waits for: its answer finds ps pruned
	s.broadcast(nil, "exit")
	s.settle(protocol.SettleFailed) // no-op once settled
	if err := errors.Join(agentrun.Cleanup(s.spec), s.releaseFolder()); err != nil {
		s.m.log.Warn("clean up seat", "seat", s.info.Name, "err", err)
	}
	s.m.log.Info("seat exited", "seat", s.info.Name, "code", code)
	close(s.done)
	if !stopping && code != 0 && restartOnFailure(s.persona) && s.m.ctx.Err() == nil && restarts < 3 {
		s.m.restart(s)
	}
}

func (s *seat) releaseFolder() error {
	if s.release == nil {
		return os.RemoveAll(agentrun.RunDir(s.m.Project, s.info.Name))
	}
	return s.release()
}

func restartOnFailure(per *workspace.Persona) bool {
	v, _ := per.Meta["restart"].(string)
	return v == "on-failure"
}

// restart starts a failed seat again under the same name.
func (m *Manager) restart(old *seat) {
	con, ok := connector.Lookup(old.info.Agent)
	if !ok {
		return
	}
	s := &seat{m: m, persona: old.persona, args: old.args, spawner: old.spawner, screen: newScreen(screenSize),
		sessions: map[string]*session{}, settled: make(chan struct{}), done: make(chan struct{})}
	s.info = protocol.SeatInfo{Name: old.info.Name, Persona: old.info.Persona, Agent: old.info.Agent, Process: protocol.SeatStarting,
		Spawner: old.info.Spawner, Cwd: old.info.Cwd, Host: m.Host, Instance: m.instance, Restarts: old.info.Restarts + 1}
	m.mu.Lock()
	m.seats[s.info.Name] = s
	m.mu.Unlock()
	m.log.Info("restarting seat (restart: on-failure)", "seat", s.info.Name, "restart", s.info.Restarts)
	if err := m.start(s, con, s.info.Cwd); err != nil {
		m.log.Warn("restart seat", "seat", s.info.Name, "err", err)
		m.mu.Lock()
		m.seats[s.info.Name] = old
		m.mu.Unlock()
	}
}

// stop ends the seat: SIGTERM to its process group, then SIGKILL after grace (at once
// with force), and waits until it has ended and its credential is gone. A seat still
// starting has no process to signal: its start is cancelled, and kills what it started.
func (s *seat) stop(force bool, grace time.Duration) {
	s.mu.Lock()
	switch s.info.Process {
	case protocol.SeatExited:
		s.mu.Unlock()
		return
	case protocol.SeatStarting, protocol.SeatRunning:
		s.moveLocked(protocol.SeatStopping)
	}
	s.stopping = true
	if s.cancelStart != nil {
		s.cancelStart()
	}
	s.mu.Unlock()
	sig := syscall.SIGTERM
	if force {
		sig = syscall.SIGKILL
	}
	s.signal(sig)
	if s.awaitEnd(grace) {
		return
	}
	s.signal(syscall.SIGKILL)
	if !s.awaitEnd(5 * time.Second) {
		s.m.log.Warn("seat did not end after SIGKILL", "seat", s.info.Name)
	}
}

// adoptedPoll is how often a stop checks whether an adopted seat's process has ended.
const adoptedPoll = 50 * time.Millisecond

// awaitEnd waits up to d for the seat to end and says whether it did. A seat this manager
// started ends when its done closes (its process waited for). An adopted seat's process
// is not this manager's child, so nothing waits for it: its end is polled here, and
// recorded (adoptedEnded) by whichever of this stop and its watcher sees it first. The
// watcher alone would not do: it stops with the manager's context, which has ended by the
// time a shutting-down manager stops its seats.
func (s *seat) awaitEnd(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var poll <-chan time.Time
	if s.adopted != nil {
		tick := time.NewTicker(adoptedPoll)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		select {
		case <-s.done:
			return true
		case <-t.C:
			return false
		case <-poll:
			if alive, err := s.adopted.Alive(); err == nil && !alive {
				s.adoptedEnded()
				<-s.done // closed by this call or by the watcher's, which is cleaning up
				return true
			}
		}
	}
}

// stopAll stops every running seat this manager started or adopted, in parallel, and
// logs how many it stopped and how long that took.
func (m *Manager) stopAll() {
	m.mu.Lock()
	var seats []*seat
	for _, s := range m.seats {
		if s.running() {
			seats = append(seats, s)
		}
	}
	m.mu.Unlock()
	if len(seats) == 0 {
		return
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, s := range seats {
		wg.Add(1)
		go func() { defer wg.Done(); s.stop(false, m.StopGrace) }()
	}
	wg.Wait()
	m.log.Info("stopped the seats", "seats", len(seats), "took", time.Since(began).Round(time.Millisecond))
}

// write types data into the seat's terminal.
func (s *seat) write(data []byte) (int, error) {
	s.mu.Lock()
	ptmx, state := s.ptmx, s.info.Process
	s.mu.Unlock()
	if state.Ended() {
		return 0, refuse(codeNotFound, "seat %s has exited", s.info.Name)
	}
	if ptmx == nil {
		return 0, refuse(codeBad, "seat %s was adopted from an earlier manager: its terminal is gone", s.info.Name)
	}
	return ptmx.Write(data)
}

// attach opens, renews or closes a session; opening answers with the screen so far.
func (s *seat) attach(a protocol.AttachArgs, reply string) (protocol.AttachResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Detach {
		delete(s.sessions, a.Session)
		return protocol.AttachResult{}, nil
	}
	if s.ptmx == nil && !s.info.Process.Ended() {
		return protocol.AttachResult{}, refuse(codeBad, "seat %s was adopted from an earlier manager: its terminal is gone", s.info.Name)
	}
	res := protocol.AttachResult{TTLMs: attachTTL.Milliseconds()}
	if a.Renew {
		ss, ok := s.sessions[a.Session]
		if !ok {
			return protocol.AttachResult{}, refuse(codeNotFound, "attach session of %s has ended; attach again", s.info.Name)
		}
		ss.expires = time.Now().Add(attachTTL)
		return res, nil
	}
	if s.info.Process.Ended() {
		return protocol.AttachResult{}, refuse(codeNotFound, "seat %s has exited", s.info.Name)
	}
	if a.Cols > 0 && a.Rows > 0 && s.ptmx != nil {
		_ = pty.Setsize(s.ptmx, &pty.Winsize{Rows: uint16(a.Rows), Cols: uint16(a.Cols)})
	}
	s.sessions[a.Session] = &session{subject: reply, expires: time.Now().Add(attachTTL)}
	res.Screen = s.screen.Bytes()
	return res, nil
}

// adopt reads the seat records a previous manager left: a seat whose process still runs
// is adopted (watched until it ends, stoppable, without a terminal); one that ended is
// reported exited and its run folder, credential with it, removed.
func (m *Manager) adopt() {
	entries, err := os.ReadDir(filepath.Join(m.Project.Dir(), "run"))
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !protocol.ValidActor(e.Name()) {
			continue // not a seat's run folder (a symbolic link is never followed)
		}
		b, err := os.ReadFile(filepath.Join(m.Project.Dir(), "run", e.Name(), "seat.json"))
		if err != nil {
			continue // a foreground spawn's folder
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.Info.Name != e.Name() {
			m.log.Warn("unreadable seat record", "folder", e.Name(), "err", err)
			continue
		}
		per, err := m.Project.Persona(r.Info.Persona)
		if err != nil {
			per = &workspace.Persona{Name: r.Info.Persona}
		}
		sp, _ := protocol.ParsePrincipal(r.Info.Spawner)
		// What the record lists for removal is removed only inside the seat's own folders.
		s := &seat{m: m, persona: per, spawner: caller{p: sp}, screen: newScreen(4 << 10),
			sessions: map[string]*session{}, settled: make(chan struct{}), done: make(chan struct{}),
			spec: connector.Spec{Dirs: m.seatFolders(r.Info.Agent, per, r.Info.Name), Remove: r.Remove}}
		s.info = r.Info
		s.info.Adopted, s.info.Instance, s.info.Host = true, m.instance, m.Host
		outcome := r.Info.Outcome
		if outcome == "" {
			outcome = protocol.SettleUncertain // the earlier manager's record predates the settle
		}
		s.info.Outcome = ""
		s.settle(outcome)
		alive := false
		if r.Start != "" && r.Info.PID > 0 {
			alive, _ = workspace.Record{PID: r.Info.PID, Start: r.Start}.Alive()
		}
		// The seat is complete before ps can see it.
		if alive {
			s.info.Process, s.start = protocol.SeatRunning, r.Start
			s.adopted = &workspace.Record{PID: r.Info.PID, Start: r.Start}
		} else {
			s.info.Process, s.info.Code, s.info.Ended = protocol.SeatExited, nil, time.Now().UnixMilli()
		}
		m.mu.Lock()
		m.seats[s.info.Name] = s
		m.mu.Unlock()
		if !alive {
			if err := errors.Join(agentrun.Cleanup(s.spec), s.releaseFolder()); err != nil {
				m.log.Warn("clean up ended seat", "seat", s.info.Name, "err", err)
			}
			close(s.done)
			m.log.Info("seat of an earlier manager had ended", "seat", s.info.Name, "pid", r.Info.PID)
			m.prune()
			continue
		}
		m.log.Info("adopted seat", "seat", s.info.Name, "pid", r.Info.PID)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.watchAdopted()
		}()
	}
}

// watchAdopted polls an adopted process (not this manager's child, so it cannot be
// waited for) until it ends or the manager stops; its exit code is unknown.
func (s *seat) watchAdopted() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.m.ctx.Done():
			return
		case <-t.C:
		}
		if alive, err := s.adopted.Alive(); err == nil && !alive {
			s.adoptedEnded()
			return
		}
	}
}

// adoptedEnded records, once, that an adopted seat's process has ended: exited, its
// credential and files removed, its done closed. A later call waits for the first.
func (s *seat) adoptedEnded() {
	s.adoptedEnd.Do(func() {
		s.mu.Lock()
		s.moveLocked(protocol.SeatExited)
		s.info.Ended = time.Now().UnixMilli()
		s.mu.Unlock()
		if err := errors.Join(agentrun.Cleanup(s.spec), s.releaseFolder()); err != nil {
			s.m.log.Warn("clean up adopted seat", "seat", s.info.Name, "err", err)
		}
		s.m.log.Info("adopted seat exited", "seat", s.info.Name)
		close(s.done)
		s.m.prune()
	})
}

// RunningSeats names the seats of proj whose process still runs, from the records its
// managers keep (a foreground spawn keeps none), sorted.
func RunningSeats(proj *workspace.Project) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(proj.Dir(), "run"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seats: %w", err)
	}
	var names []string
	for _, e := range entries {
		b, err := os.ReadFile(seatFile(proj, e.Name()))
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil || r.Start == "" || r.Info.Process.Ended() {
			continue
		}
		if alive, _ := (workspace.Record{PID: r.Info.PID, Start: r.Start}).Alive(); alive {
			names = append(names, r.Info.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}
