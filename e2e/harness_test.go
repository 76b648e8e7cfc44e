package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cotal-ai/cotal/internal/meshtest"
)

// EnvBin names the folder the harness executables are taken from (before PATH).
const EnvBin = "COTAL_E2E_BIN"

// cotalExe is the cotal binary built once by TestMain.
var cotalExe string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cotal-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cotalExe = filepath.Join(dir, "cotal")
	gobin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		fmt.Fprintln(os.Stderr, "build cotal: no go on PATH:", err)
		return 1
	}
	build := exec.Command(gobin, "build", "-o", cotalExe, "github.com/cotal-ai/cotal/cmd/cotal")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build cotal:", err)
		return 1
	}
	return m.Run()
}

// harness returns the path of the harness program name, or skips the test when it is not
// installed ($COTAL_E2E_BIN, else PATH).
func harness(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv(EnvBin); dir != "" {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: put it on PATH or in $%s (.ci/run installs it)", name, EnvBin)
	}
	return p
}

// project is a cotal project in a temporary folder, with a running mesh (cotal up) and a
// home of its own: every harness's configuration and state lands under it.
type project struct {
	t    *testing.T
	dir  string // the project folder (cwd of every command)
	home string
	env  []string
}

// newProject makes the project's folders and environment. bins are folders put first
// on PATH (the harnesses' own folders); cotal's folder comes before them.
func newProject(t *testing.T, bins ...string) *project {
	t.Helper()
	root := t.TempDir()
	p := &project{t: t, dir: filepath.Join(root, "proj"), home: filepath.Join(root, "home")}
	for _, d := range []string{p.dir, p.home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	path := []string{filepath.Dir(cotalExe)}
	path = append(path, bins...)
	path = append(path, os.Getenv("PATH"))
	p.env = []string{
		"PATH=" + strings.Join(path, string(os.PathListSeparator)),
		"HOME=" + p.home,
		"USER=e2e", "LOGNAME=e2e",
		"COTAL_HOME=" + filepath.Join(p.home, ".cotal"),
		"XDG_CONFIG_HOME=" + filepath.Join(p.home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(p.home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(p.home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(p.home, ".cache"),
		"TMPDIR=" + root,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
	}
	return p
}

// setenv adds or replaces variables (KEY=VALUE) of every later command.
func (p *project) setenv(kv ...string) {
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		out := p.env[:0]
		for _, old := range p.env {
			if !strings.HasPrefix(old, k+"=") {
				out = append(out, old)
			}
		}
		p.env = append(out, e)
	}
}

// cotal runs a cotal command to its end and returns its stdout; a failure fails the test.
func (p *project) cotal(args ...string) string {
	p.t.Helper()
	out, err := p.try(args...)
	if err != nil {
		p.t.Fatalf("cotal %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// try runs a cotal command to its end: its stdout, and an error holding its stderr.
func (p *project) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cotalExe, args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w\n%s%s", err, out.String(), errb.String())
	}
	return out.String(), nil
}

// up starts the project's authenticated mesh on a free loopback port in the foreground
// (cotal up as a child that the kernel stops when this test process dies, so a killed run
// leaves no mesh behind), waits until it serves, and brings it down when the test ends.
func (p *project) up() {
	p.t.Helper()
	cmd := exec.Command(cotalExe, "up", "--server", "nats://127.0.0.1:0", "--space", "main")
	cmd.Dir, cmd.Env = p.dir, p.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("cotal up: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.t.Cleanup(func() {
		if _, err := p.try("down", "--with-agents"); err != nil {
			p.t.Logf("cotal down: %v", err)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		p.logFiles()
	})
	until(p.t, "the mesh serves (cotal status)", 60*time.Second, func() bool {
		select {
		case <-done:
			p.t.Fatalf("cotal up exited: %s", out.String())
		default:
		}
		_, err := p.try("status", "--json")
		return err == nil
	})
}

// logFiles logs the tail of the mesh's logs when the test failed.
func (p *project) logFiles() {
	if !p.t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(p.dir, ".cotal", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		p.t.Logf("--- %s:\n%s", f, b)
	}
}

// session is a program running in a pseudo-terminal, its output kept as plain text.
type session struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	tty  *os.File
	done chan struct{}
	err  error

	mu  sync.Mutex
	out bytes.Buffer
}

// start runs cotal args in a pseudo-terminal in the project, as an operator at a terminal
// would; the test's end stops it (SIGTERM, then SIGKILL).
func (p *project) start(name string, args ...string) *session {
	p.t.Helper()
	cmd := exec.Command(cotalExe, args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	dieWithTest(cmd) // pty adds its session
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		p.t.Fatalf("start %s: %v", name, err)
	}
	s := &session{t: p.t, name: name, cmd: cmd, tty: tty, done: make(chan struct{})}
	go s.read()
	go func() { s.err = cmd.Wait(); close(s.done) }()
	p.t.Cleanup(s.stop)
	return s
}

func (s *session) read() {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.tty.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// ansi matches terminal control sequences, dropped from the text tests read.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78cDEHMNOZ]`)

// text is everything the program wrote, control sequences removed.
func (s *session) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ansi.ReplaceAllString(s.out.String(), "")
}

// exited reports whether the program has ended.
func (s *session) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// send types text into the terminal.
func (s *session) send(text string) {
	if _, err := s.tty.WriteString(text); err != nil && !s.exited() {
		s.t.Errorf("%s: type: %v", s.name, err)
	}
}

// stop ends the program (SIGTERM, SIGKILL after 10 s) and logs its screen when the test
// failed.
func (s *session) stop() {
	if !s.exited() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	_ = s.tty.Close()
	if s.t.Failed() {
		txt := s.text()
		if len(txt) > 6000 {
			txt = txt[len(txt)-6000:]
		}
		s.t.Logf("--- %s (exit %v), last output:\n%s", s.name, s.err, txt)
	}
}

// until waits for cond, failing the test after deadline.
func until(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	meshtest.Until(t, what, deadline, cond)
}
