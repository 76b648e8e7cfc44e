package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rogpeppe/go-internal/testscript"
)

// stockServer is the nats-server binary built from the module version go.mod pins, once
// per test binary, into dir (a test's temporary folder, removed when the tests end).
type stockServer struct {
	dir  string
	once sync.Once
	path string
	err  error

	mu    sync.Mutex
	procs map[*testscript.TestScript]map[string]*natsProc // per script, by name
}

// binary builds nats-server on first use and returns its path.
func (s *stockServer) binary() (string, error) {
	s.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			s.err = fmt.Errorf("find the go tool: %w", err)
			return
		}
		s.path = filepath.Join(s.dir, "nats-server")
		// Run from this package's folder, so the build takes the version go.mod pins.
		out, err := exec.Command(gobin, "build", "-o", s.path, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			s.err = fmt.Errorf("go build nats-server: %w\n%s", err, out)
		}
	})
	return s.path, s.err
}

// natsProc is one stock nats-server process a script started.
type natsProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// cmd is the script command natsproc: stock nats-server processes, each run as
// `nats-server -c FILE` from the binary built by binary (a script runs it only under
// [exec:go]):
//
//	natsproc start NAME FILE VAR   start it in the current folder (log in NAME.log), wait
//	                               until its client port accepts, set $VAR to its URL
//	natsproc stop NAME             SIGTERM, and wait until it exited
//	natsproc kill NAME             SIGKILL (a crash), and wait until it is gone
//
// Every process still running when the script ends is killed and waited for.
func (s *stockServer) cmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || (args[0] == "start" && len(args) != 4) || (args[0] != "start" && len(args) != 2) {
		ts.Fatalf("usage: natsproc start NAME FILE VAR | natsproc stop|kill NAME")
	}
	s.mu.Lock()
	if s.procs == nil {
		s.procs = map[*testscript.TestScript]map[string]*natsProc{}
	}
	procs := s.procs[ts]
	if procs == nil {
		procs = map[string]*natsProc{}
		s.procs[ts] = procs
		ts.Defer(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, p := range s.procs[ts] {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			delete(s.procs, ts)
		})
	}
	s.mu.Unlock()
	name := args[1]
	switch args[0] {
	case "start":
		s.mu.Lock()
		dup := procs[name] != nil
		s.mu.Unlock()
		if dup {
			ts.Fatalf("natsproc: %s runs already", name)
		}
		bin, err := s.binary()
		if err != nil {
			ts.Fatalf("natsproc: %v", err)
		}
		opts, err := server.ProcessConfigFile(ts.MkAbs(args[2]))
		if err != nil {
			ts.Fatalf("natsproc: read %s: %v", args[2], err)
		}
		if opts.Port <= 0 {
			ts.Fatalf("natsproc: %s names no client port", args[2])
		}
		addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
		log, err := os.Create(ts.MkAbs(name + ".log"))
		if err != nil {
			ts.Fatalf("natsproc: %v", err)
		}
		defer func() { _ = log.Close() }() // the child holds its own descriptor
		cmd := exec.Command(bin, "-c", ts.MkAbs(args[2]))
		cmd.Dir = ts.MkAbs(".")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			ts.Fatalf("natsproc: start %s: %v", name, err)
		}
		p := &natsProc{cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		s.mu.Lock()
		procs[name] = p
		s.mu.Unlock()
		for deadline := time.Now().Add(20 * time.Second); ; { // a hang guard
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case <-p.done:
				ts.Fatalf("natsproc: %s exited: %v\n%s", name, cmd.ProcessState, ts.ReadFile(name+".log"))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				ts.Fatalf("natsproc: %s does not accept on %s\n%s", name, addr, ts.ReadFile(name+".log"))
			}
		}
		ts.Setenv(args[3], "nats://"+addr)
	case "stop", "kill":
		s.mu.Lock()
		p := procs[name]
		s.mu.Unlock()
		if p == nil {
			ts.Fatalf("natsproc: no process %s", name)
		}
		sig := syscall.SIGTERM
		if args[0] == "kill" {
			sig = syscall.SIGKILL
		}
		if err := p.cmd.Process.Signal(sig); err != nil {
			ts.Fatalf("natsproc: signal %s: %v", name, err)
		}
		select {
		case <-p.done:
		case <-time.After(30 * time.Second): // a hang guard
			ts.Fatalf("natsproc: %s did not exit", name)
		}
		s.mu.Lock()
		delete(procs, name)
		s.mu.Unlock()
	default:
		ts.Fatalf("natsproc: unknown verb %q", args[0])
	}
}
