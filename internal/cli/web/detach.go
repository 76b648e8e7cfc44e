package web

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/workspace"
)

// detach re-runs `cotal web` in the background with its output in .cotal/web.log and its
// pidfile .cotal/web.pid, and returns once the child serves (or says why it did not).
func detach(ctx context.Context, opts *Options, t cmdutil.Target) error {
	proj := t.Project
	if proj == nil {
		return cmdutil.Refuse("`cotal web --detach` outside a project", "a detached dashboard keeps its pidfile and log in the project's .cotal/",
			"cotal web  # in the foreground, or cd to the project first")
	}
	pidfile := pidPath(proj.Dir())
	if rec, err := workspace.ReadPidfile(pidfile); err == nil {
		if alive, _ := rec.Alive(); alive {
			return cmdutil.Refuse("`cotal web --detach`", fmt.Sprintf("a dashboard already runs for %s (pid %d)", proj.Root, rec.PID), "cotal down web")
		}
		if err := workspace.RemovePidfile(pidfile); err != nil {
			return fmt.Errorf("stale %s: %w", pidfile, err)
		}
	} else if !errors.Is(err, workspace.ErrNoPidfile) {
		return fmt.Errorf("read %s: %w", pidfile, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the cotal binary: %w", err)
	}
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		exe = "/proc/self/exe" // the very build that runs, even if replaced since
	}
	logPath := proj.Dir() + string(os.PathSeparator) + LogFileName
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("readiness pipe: %w", err)
	}
	defer r.Close()
	args := []string{"web", "--no-open", "--pidfile", pidfile, "--host", opts.Host, "--port", strconv.Itoa(opts.Port), "--space", t.Space}
	if opts.Mesh.Server != "" {
		args = append(args, "--server", opts.Mesh.Server)
	}
	if opts.Mesh.Creds != "" {
		args = append(args, "--creds", opts.Mesh.Creds)
	}
	if opts.AllowRemote {
		args = append(args, "--allow-remote")
	}
	for _, h := range opts.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	child := exec.Command(exe, args...)
	child.Args[0] = os.Args[0]
	child.Dir = proj.Root
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{w} // fd 3
	child.Env = append(os.Environ(), cmdutil.ReadyFDEnv+"=3")
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start background dashboard: %w", err)
	}
	w.Close() // the child holds the only write end now
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n') // EOF: the child ended without ready
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		url, ok := strings.CutPrefix(l, "ready ")
		if !ok {
			err := <-exited
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("background dashboard did not start (%v); see %s:\n%s", err, logPath, lastLines(string(b), 5))
		}
		fmt.Fprintf(opts.IO.Out, "✓ cotal web: %s (space %s) running in the background, pid %d\n", url, t.Space, child.Process.Pid)
		fmt.Fprintf(opts.IO.ErrOut, "log: %s; stop it with `cotal down web`\n", logPath)
		return nil
	case <-ctx.Done():
		_ = child.Process.Signal(syscall.SIGTERM) // interrupted before ready: undo the start
		<-exited
		return ctx.Err()
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
