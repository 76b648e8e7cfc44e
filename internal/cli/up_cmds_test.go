package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdTTYRun runs `cotal ARGS...` with its standard output on a terminal (a pseudo
// terminal), as a person at a keyboard runs it, and checks its exit code; what the
// terminal showed is the command's stdout, its stderr is stderr:
//
//	ttyrun CODE ARGS...
func cmdTTYRun(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: ttyrun CODE ARGS...")
	}
	runOnTerminal(ts, args[0], nil, args[1:])
}

// cmdTTYAnswer runs `cotal ARGS...` on a terminal as ttyrun does, and types ANSWER and
// Enter, as a person answering its question does:
//
//	ttyanswer CODE ANSWER ARGS...  (ARGS without the leading cotal)
func cmdTTYAnswer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: ttyanswer CODE ANSWER ARGS...")
	}
	runOnTerminal(ts, args[0], &args[1], args[2:])
}

// runOnTerminal runs `cotal args...` with stdin and stdout on a pseudo terminal, types
// answer and Enter first when it is not nil, and checks the exit code is code.
func runOnTerminal(ts *testscript.TestScript, code string, answer *string, args []string) {
	want, err := strconv.Atoi(code)
	if err != nil {
		ts.Fatalf("exit code %q: %v", code, err)
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	ptm, tty, err := pty.Open()
	if err != nil {
		ts.Fatalf("open a pseudo terminal: %v", err)
	}
	defer ptm.Close()
	cmd := exec.Command(exe, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, &stderr
	if err := cmd.Start(); err != nil {
		ts.Fatalf("start cotal: %v", err)
	}
	tty.Close() // the child holds its own copy
	if answer != nil {
		if _, err := io.WriteString(ptm, *answer+"\n"); err != nil {
			ts.Fatalf("type the answer: %v", err)
		}
	}
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&shown, ptm) // ends with EIO once the child has closed the terminal
		close(copied)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-time.After(30 * time.Second): // a hang guard
		_ = cmd.Process.Kill()
		ts.Fatalf("cotal %v did not exit within 30s", args)
	}
	<-copied
	got := 0
	var exitErr *exec.ExitError
	if errors.As(werr, &exitErr) {
		got = exitErr.ExitCode()
	} else if werr != nil {
		ts.Fatalf("cotal: %v", werr)
	}
	fmt.Fprint(ts.Stdout(), shown.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
	if got != want {
		ts.Fatalf("cotal exited %d, want %d\nstderr:\n%s", got, want, stderr.String())
	}
}

// scriptEnv is the environment of the script, for a process it starts by hand.
func scriptEnv(ts *testscript.TestScript) []string {
	env := os.Environ()
	for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR", "PATH"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	return env
}

// cmdSigWhen sends a signal to a process `proc start` started, once a path exists (or at
// once with -now), so a script can stop it at a chosen step of its work; the hang guard
// is 20 s:
//
//	sigwhen NAME INT|TERM|HUP -now|PATH
func cmdSigWhen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: sigwhen NAME INT|TERM|HUP -now|PATH")
	}
	sig := map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP}[args[1]]
	if sig == 0 {
		ts.Fatalf("sigwhen: signal %q: want INT, TERM or HUP", args[1])
	}
	ps := ts.Value(procsKey{}).(*procs)
	ps.mu.Lock()
	p := ps.m[args[0]]
	ps.mu.Unlock()
	if p == nil {
		ts.Fatalf("no process %q", args[0])
	}
	if args[2] != "-now" {
		path := ts.MkAbs(args[2])
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Lstat(path); err == nil {
				break
			}
			select {
			case <-p.done:
				ts.Fatalf("%s exited (%v) before %s appeared\nstderr:\n%s", args[0], p.err, args[2], p.errOut.String())
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				ts.Fatalf("%s: no %s within 20s", args[0], args[2])
			}
		}
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		ts.Fatalf("signal %s: %v", args[0], err)
	}
}
