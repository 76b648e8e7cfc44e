package manager

import (
	"context"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/cotal-ai/cotal/agentrun"
	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// moveLocked moves the seat to next when the state machine allows it (see
// protocol.SeatState) and reports whether it did; s.mu is held. An illegal move is a bug
// of the manager: it is logged and the state is kept.
func (s *seat) moveLocked(next protocol.SeatState) bool {
	to, err := s.info.Process.Move(next)
	if err != nil {
		s.m.log.Warn("seat state", "seat", s.info.Name, "err", err)
		return false
	}
	s.info.Process = to
	return true
}

// beginStart is the context of the seat's start, a child of parent: a stop while the
// seat starts cancels it (see stop). end releases it once the start is over.
func (s *seat) beginStart(parent context.Context) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancel(parent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info.Process != protocol.SeatStarting {
		cancel() // stopped before the start began
	}
	s.cancelStart = cancel
	return ctx, cancel
}

// prepared records what the start built for the seat, under its lock (ps reads it).
func (s *seat) prepared(l connector.Launch, spec connector.Spec, program string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch, s.spec, s.program = l, spec, program
	s.info.Model, s.info.Role = l.Model, l.Role
}

// setUID records the lifecycle uid of the seat's minted credential.
func (s *seat) setUID(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info.UID = uid
}

// launched records the seat's started process. It reports false when a stop came while
// the seat started: the caller then kills the process it started (the seat stays
// stopping, and ends as any process does).
func (s *seat) launched(proc *os.Process, ptmx *os.File, start string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.ptmx, s.start = proc, ptmx, start
	s.info.PID, s.info.Started = proc.Pid, time.Now().UnixMilli()
	return s.info.Process == protocol.SeatStarting && s.moveLocked(protocol.SeatRunning)
}

// startFailed ends a seat whose start failed before any process ran: exited, settled
// failed, and done for a stop that waits on it. A seat that has a process ends through
// exited instead.
func (s *seat) startFailed() {
	s.mu.Lock()
	if s.proc != nil || s.info.Process.Ended() {
		s.mu.Unlock()
		return
	}
	s.moveLocked(protocol.SeatExited)
	s.info.Ended = time.Now().UnixMilli()
	s.mu.Unlock()
	s.settle(protocol.SettleFailed)
	close(s.done)
}

// signal sends sig to the seat's process group and process, only when it has a known
// process (pid > 0, not ended) that is still the seat's: the process with that pid began
// when the seat's did. A seat that has not started yet, or whose pid was reused, gets
// nothing; kill(-0) would signal the manager's own group.
func (s *seat) signal(sig syscall.Signal) {
	s.mu.Lock()
	pid, start, proc, ended := s.info.PID, s.start, s.proc, s.info.Process.Ended()
	s.mu.Unlock()
	if pid <= 0 || ended {
		return
	}
	if start != "" {
		if alive, err := (workspace.Record{PID: pid, Start: start}).Alive(); err != nil || !alive {
			return
		}
	} else if proc == nil || proc.Signal(syscall.Signal(0)) != nil {
		return // an adopted seat without its start time, or a child already reaped
	}
	signalSeat(pid, proc, sig)
}

// prune forgets the oldest ended seats past KeepEnded: ps keeps showing the recently
// ended ones, and a long-running manager does not grow.
func (m *Manager) prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	type ended struct {
		name string
		at   int64
	}
	var gone []ended
	for name, s := range m.seats {
		s.mu.Lock()
		if s.info.Process.Ended() {
			gone = append(gone, ended{name, s.info.Ended})
		}
		s.mu.Unlock()
	}
	if len(gone) <= m.KeepEnded {
		return
	}
	sort.Slice(gone, func(i, j int) bool {
		if gone[i].at != gone[j].at {
			return gone[i].at < gone[j].at
		}
		return gone[i].name < gone[j].name
	})
	for _, g := range gone[:len(gone)-m.KeepEnded] {
		delete(m.seats, g.name)
	}
}

// seatFolders are the folders a seat of agent (a connector) named name owns: its run
// folder and the private folders its connector makes for that name. They bound what a
// seat record read back from disk may have removed (see agentrun.Cleanup).
func (m *Manager) seatFolders(agent string, per *workspace.Persona, name string) []string {
	dirs := []string{agentrun.RunDir(m.Project, name)}
	con, ok := connector.Lookup(agent)
	if !ok {
		return dirs
	}
	l := agentrun.NewLaunch(agentrun.Target{Project: m.Project, Space: m.Space, Servers: m.Servers, Auth: m.Auth, Exe: m.Exe},
		per, agentrun.Overrides{Name: name})
	if spec, err := con.Build(l); err == nil {
		dirs = append(dirs, spec.Dirs...)
	}
	return dirs
}
