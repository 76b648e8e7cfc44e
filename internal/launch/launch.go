// Package launch starts cotal's own background processes the one way cotal does it: it
// finds this binary (Self, Command), starts a child detached from the terminal with a
// ready pipe and, for a supervised daemon, a lifeline (Start), and waits for the child's
// "ready ..." line or its exit (Child.Ready). The child's end of the handshake is
// SignalReady and Lifeline.
//
// The pipes are inherited files: on Unix at file descriptors 3 and 4 (exec.Cmd.ExtraFiles),
// on Windows as inherited handles; the child learns which from ReadyEnv and LifelineEnv.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ReadyEnv names an inherited pipe on which a background process tells the parent waiting
// for it that it serves: one line, "ready ...".
const ReadyEnv = "COTAL_READY_FD"

// LifelineEnv names an inherited pipe that ties a supervised daemon's life to the process
// that started it: the parent keeps the write end and never writes, so a read sees
// end-of-file once the parent is gone, however it ended (SIGKILL included).
const LifelineEnv = "COTAL_PARENT_FD"

// Self is the path of this binary for another program to run (a harness's MCP server
// entry, a service unit): the binary as the shell named it (os.Args[0], resolved on PATH),
// so agents start the same cotal the person typed, else the running executable
// (executable, os.Executable when nil).
func Self(executable func() (string, error)) (string, error) {
	if a := os.Args[0]; a != "" {
		p := a
		if !strings.ContainsRune(a, filepath.Separator) && !strings.ContainsRune(a, '/') {
			if lp, err := exec.LookPath(a); err == nil {
				p = lp
			} else {
				p = ""
			}
		}
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				if st, err := os.Stat(abs); err == nil && st.Mode().IsRegular() {
					return abs, nil
				}
			}
		}
	}
	if executable == nil {
		executable = os.Executable
	}
	p, err := executable()
	if err != nil {
		return "", fmt.Errorf("find the cotal executable: %w", err)
	}
	return p, nil
}

// Command is a command that runs this very binary again with args, for this process to
// start itself in the background (the broker, its daemons, the dashboard). Where the
// system names the running image (Linux: /proc/self/exe) that is what runs, so a
// background child and a daemon restarted hours later run the very build that started
// them, even after the file was replaced or deleted (go run deletes its binary); elsewhere
// Self's path, which must then still exist. Args[0] is this process's own.
func Command(executable func() (string, error), args ...string) (*exec.Cmd, error) {
	exe := runningImage()
	if exe == "" {
		var err error
		if exe, err = Self(executable); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = os.Args[0]
	return cmd, nil
}

// Options says how Start detaches a child.
type Options struct {
	// Session: the child leads a session of its own, leaving the terminal's (a background
	// broker or dashboard that outlives the command starting it); otherwise it leads a
	// process group of its own within the session (a daemon its parent stops).
	Session bool
	// Lifeline is the read end of a pipe whose write end only the parent holds; the
	// child inherits it (LifelineEnv) and stops at its end-of-file.
	Lifeline *os.File
}

// Child is a process Start launched: its ready line, its exit, its stop.
type Child struct {
	// Process is the started process; Wait belongs to the Child.
	Process *os.Process
	line    chan string
	exited  chan struct{}
	err     error // of Wait, set before exited closes
}

// Start starts cmd (from Command, its Stdout, Stderr and Dir set) detached as opts says,
// with the ready pipe and, if given, the lifeline; a ReadyEnv or LifelineEnv value the
// environment already has is replaced. The child's Wait is the Child's.
func Start(cmd *exec.Cmd, opts Options) (*Child, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("readiness pipe: %w", err)
	}
	files := []*os.File{w}
	if opts.Lifeline != nil {
		files = append(files, opts.Lifeline)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, ReadyEnv+"=") || strings.HasPrefix(kv, LifelineEnv+"=")
	})
	names, err := inherit(cmd, files)
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	env = append(env, ReadyEnv+"="+names[0])
	if opts.Lifeline != nil {
		env = append(env, LifelineEnv+"="+names[1])
	}
	cmd.Env = env
	detach(cmd, opts.Session)
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close() // the child holds the only write end now
	c := &Child{Process: cmd.Process, line: make(chan string, 1), exited: make(chan struct{})}
	go func() {
		defer r.Close()
		s, _ := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n') // EOF: it ended without ready
		c.line <- strings.TrimSpace(s)
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// ErrNotReady is wrapped by Ready when the child closed its ready pipe or exited without
// reporting ready.
var ErrNotReady = errors.New("exited before it was ready")

// Ready waits for the child's ready line and returns what follows "ready ". A child that
// ends without it gives an error wrapping ErrNotReady and its exit status; a ctx that ends
// first stops the child (Stop with grace) and gives ctx's error.
func (c *Child) Ready(ctx context.Context, grace time.Duration) (string, error) {
	select {
	case l := <-c.line:
		if rest, ok := strings.CutPrefix(l, "ready "); ok {
			return rest, nil
		}
		<-c.exited // the pipe closed: it is ending
		return "", c.notReady()
	case <-ctx.Done():
		c.Stop(grace)
		return "", ctx.Err()
	}
}

func (c *Child) notReady() error {
	if c.err != nil {
		return fmt.Errorf("%w (%v)", ErrNotReady, c.err)
	}
	return fmt.Errorf("%w (exit status 0)", ErrNotReady)
}

// Exited is closed once the child has exited; Err then says how.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Err is the child's exit error (nil for status 0); valid once Exited is closed.
func (c *Child) Err() error { return c.err }

// Stop asks the child to end (Terminate), kills it after grace, and waits for it.
func (c *Child) Stop(grace time.Duration) {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = terminate(c.Process)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		_ = c.Process.Kill()
		<-c.exited
	}
}

// Terminate asks process pid to end and release what it holds: SIGTERM on Unix; on
// Windows, which has no such request between processes, it is killed.
func Terminate(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release()
	return terminate(p)
}

// SignalReady writes "ready <what>" to the pipe ReadyEnv names and closes it. Without the
// variable it does nothing: the process was started by hand.
func SignalReady(getenv func(string) string, what string) error {
	if getenv == nil {
		return nil
	}
	v := getenv(ReadyEnv)
	if v == "" {
		return nil
	}
	f, err := inherited(v, "ready")
	if err != nil {
		return fmt.Errorf("%s=%q: %w", ReadyEnv, v, err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "ready %s\n", what); err != nil {
		return fmt.Errorf("report readiness: %w", err)
	}
	return nil
}

// ErrParentGone is the cause of a Lifeline context that ended because the parent did.
var ErrParentGone = errors.New("the process that started this daemon is gone")

// Lifeline returns a context that ends when ctx does or, with LifelineEnv set, when the
// parent ends (context.Cause is then ErrParentGone). stop releases the watch; call it when
// done. Without the variable it returns ctx itself: the process was started by hand.
func Lifeline(ctx context.Context, getenv func(string) string) (_ context.Context, stop func(), _ error) {
	v := ""
	if getenv != nil {
		v = getenv(LifelineEnv)
	}
	if v == "" {
		return ctx, func() {}, nil
	}
	f, err := lifelinePipe(v)
	if err != nil {
		return nil, nil, fmt.Errorf("%s=%q: %w", LifelineEnv, v, err)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, f) // returns at end-of-file (the parent is gone) or on Close
		cancel(ErrParentGone)
	}()
	return cctx, func() {
		cancel(context.Canceled)
		_ = f.Close() // a read-only pipe end: nothing to flush
		if closeEndsRead {
			<-done
		}
	}, nil
}
