package cli_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli"
	"github.com/cotal-ai/cotal/oidc/oidctest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"cotal":     func() { os.Exit(cli.Main()) },
		"mcpagent":  func() { os.Exit(mcpAgent()) },
		"seatagent": func() { os.Exit(seatAgent()) },
		"refagent":  func() { os.Exit(refAgent()) },
		"runseat":   func() { os.Exit(runSeat()) },
	})
}

func TestScripts(t *testing.T) {
	stock := &stockServer{dir: t.TempDir()} // nats-server, built once if a script needs it
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata",
		RequireExplicitExec: true,
		Setup:               setup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"proc":        cmdProc,
			"holdport":    cmdHoldPort,
			"rawnats":     cmdRawNATS,
			"killpid":     cmdKillPid,
			"crash":       cmdCrash,
			"sha256":      cmdSHA256,
			"waitcmp":     cmdWaitCmp,
			"idp":         cmdIdP,
			"refidp":      cmdRefIdP,
			"kick":        cmdKick,
			"srvstats":    cmdSrvStats,
			"bundle":      cmdBundle,
			"setq":        cmdSetq,
			"peer":        cmdPeer,
			"posts":       cmdPosts,
			"exits":       cmdExits,
			"aclrow":      cmdACLRow,
			"streams":     cmdStreams,
			"tlscerts":    cmdTLSCerts,
			"meshurl":     cmdMeshURL,
			"waitgrep":    cmdWaitGrep,
			"natsconf":    cmdNATSConf,
			"tlsdial":     cmdTLSDial,
			"natsproc":    stock.cmd,
			"whoholds":    cmdWhoHolds,
			"mgrreq":      cmdMgrReq,
			"repeat":      cmdRepeat,
			"mcpsessions": cmdMCPSessions,
			"claimkill":   cmdClaimKill,
			"webget":      cmdWebGet,
			"credpeer":    cmdCredPeer,
			"a2areplier":  cmdA2AReplier,
			"a2ahttp":     cmdA2AHTTP,
			"sweep":       cmdSweep,
			"bounded":     cmdBounded,
			"longline":    cmdLongLine,
			"listing":     cmdListing,
			"ttyrun":      cmdTTYRun,
			"sigwhen":     cmdSigWhen,
			"taradd":      cmdTarAdd,
			"jsondoc":     cmdJSONDoc,
			"runnext":     cmdRunNext,
			"kvdel":       cmdKVDel,
			"stdoutvar":   cmdStdoutVar,
			"streamedit":  cmdStreamEdit,
			"oldcreds":    cmdOldCreds,
			"streamdump":  cmdStreamDump,
			"truncfile":   cmdTruncFile,
			"flipbyte":    cmdFlipByte,
			"onefile":     cmdOneFile,
			"ttyanswer":   cmdTTYAnswer,
			"refsession":  cmdRefSession,
			"runproc":     cmdRunProc,
			"a2aagent":    cmdA2AAgent,
			"waitout":     cmdWaitOut,
			"pidgone":     cmdPidGone,
			"evictagent":  cmdEvictAgent,
		},
	})
}

// logDaemonsOnFailure logs the tail of every log file a failed script's meshes and daemons
// wrote (under any .cotal/ in the work dir), which the script's own output does not show.
// The tails are read now, while the work dir exists, and logged after the script's own
// log, so a shortened test output keeps the line the script failed on.
func logDaemonsOnFailure(env *testscript.Env) {
	t, ok := env.T().(interface {
		Failed() bool
		Log(...any)
	})
	if !ok || !t.Failed() {
		return
	}
	var tails []string
	_ = filepath.WalkDir(env.WorkDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".log" || !strings.Contains(path, ".cotal") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		const tail = 4 << 10
		if len(b) > tail {
			b = b[len(b)-tail:]
		}
		tails = append(tails, "--- tail of "+path+" ---\n"+string(b))
		return nil
	})
	logAll := func() {
		for _, s := range tails {
			t.Log(s)
		}
	}
	if c, ok := env.T().(interface{ Cleanup(func()) }); ok {
		c.Cleanup(logAll)
		return
	}
	logAll()
}

type procsKey struct{}

// procs are the long-running cotal processes of one script.
type procs struct {
	mu sync.Mutex
	m  map[string]*proc
}

// proc is one cotal process whose stdin the script writes and whose output it awaits.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    lockedBuffer
	errOut lockedBuffer
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func setup(env *testscript.Env) error {
	env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
	env.Setenv("COTAL_HOME", filepath.Join(env.WorkDir, "home", ".cotal"))
	env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, "home", ".config"))
	if err := os.MkdirAll(filepath.Join(env.WorkDir, "home"), 0o700); err != nil {
		return err
	}
	// The cotal the scripts run, as a unit file names it (service script).
	if exe, err := exec.LookPath("cotal"); err == nil {
		env.Setenv("TEST_COTAL_EXE", exe)
	}
	ps := &procs{m: map[string]*proc{}}
	env.Values[procsKey{}] = ps
	env.Defer(func() {
		logDaemonsOnFailure(env)
		ps.mu.Lock()
		defer ps.mu.Unlock()
		for _, p := range ps.m {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		// Stop any mesh a script left running, whichever folder it started in.
		_ = filepath.WalkDir(env.WorkDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "nats.pid" {
				if b, err := os.ReadFile(path); err == nil {
					if pid, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && pid > 0 {
						_ = signalPid(pid, syscall.SIGTERM)
					}
				}
			}
			return nil
		})
	})
	return nil
}

// cmdProc drives long-running cotal processes:
//
//	proc start NAME ARGS...   start `cotal ARGS...` in the current folder
//	proc say NAME TEXT...     write one line to its stdin
//	proc expect NAME REGEXP   wait until its stdout matches (stderr with -stderr before NAME)
//	proc stop NAME            close its stdin and wait for it to exit 0 (! proc stop: non-zero)
//	proc signal NAME INT      send SIGINT (or TERM, or KILL) and wait for it to exit 0
//	proc wait NAME            wait for it to exit 0 by itself (! proc wait: non-zero)
func cmdProc(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: proc start|say|expect|stop|signal|wait NAME ...")
	}
	ps := ts.Value(procsKey{}).(*procs)
	verb, args := args[0], args[1:]
	if verb == "start" {
		startProc(ts, ps, args[0], args[1:])
		return
	}
	useStderr := false
	if args[0] == "-stderr" {
		useStderr, args = true, args[1:]
	}
	ps.mu.Lock()
	p := ps.m[args[0]]
	ps.mu.Unlock()
	if p == nil {
		ts.Fatalf("no process %q", args[0])
	}
	switch verb {
	case "say":
		if _, err := fmt.Fprintln(p.stdin, joinArgs(args[1:])); err != nil {
			ts.Fatalf("write to %s: %v", args[0], err)
		}
	case "expect":
		if len(args) != 2 {
			ts.Fatalf("usage: proc expect [-stderr] NAME REGEXP")
		}
		re := regexp.MustCompile(args[1])
		buf := &p.out
		if useStderr {
			buf = &p.errOut
		}
		deadline := time.Now().Add(procGuard)
		for !re.MatchString(buf.String()) {
			select {
			case <-p.done:
				if !re.MatchString(buf.String()) {
					ts.Fatalf("%s exited (%v) without %q\nstdout:\n%s\nstderr:\n%s", args[0], p.err, args[1], p.out.String(), p.errOut.String())
				}
			case <-time.After(25 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				ts.Fatalf("%s: no %q within %s\nstdout:\n%s\nstderr:\n%s", args[0], args[1], procGuard, p.out.String(), p.errOut.String())
			}
		}
		if neg {
			ts.Fatalf("unsupported: ! proc expect")
		}
	case "stop", "signal", "wait":
		switch verb {
		case "stop":
			// A process that exited by itself had its stdin closed by Wait, which may not
			// have returned yet (done not closed): that is not a failure of the stop.
			if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				select {
				case <-p.done:
				default:
					ts.Fatalf("close stdin of %s: %v", args[0], err)
				}
			}
		case "signal":
			sig := map[string]os.Signal{"INT": os.Interrupt, "TERM": syscall.SIGTERM, "KILL": os.Kill}[args[len(args)-1]]
			if sig == nil {
				ts.Fatalf("usage: proc signal NAME INT|TERM|KILL")
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				ts.Fatalf("signal %s: %v", args[0], err)
			}
		}
		select {
		case <-p.done:
		case <-time.After(procGuard):
			ts.Fatalf("%s did not exit within %s", args[0], procGuard)
		}
		ps.mu.Lock()
		delete(ps.m, args[0])
		ps.mu.Unlock()
		fmt.Fprint(ts.Stdout(), p.out.String())
		fmt.Fprint(ts.Stderr(), p.errOut.String())
		if (p.err != nil) != neg {
			ts.Fatalf("%s exited with %v\nstderr:\n%s", args[0], p.err, p.errOut.String())
		}
	default:
		ts.Fatalf("unknown proc verb %q", verb)
	}
}

// procGuard bounds proc expect, proc wait and waitcmp. It is a hang guard, not a
// measure: a race-built cotal up forming a three-node cluster on a loaded two-core
// machine may take most of a minute (it allows itself 60 s to provision and 40 s for its
// daemons).
const procGuard = 90 * time.Second

func startProc(ts *testscript.TestScript, ps *procs, name string, args []string) {
	exe, err := exec.LookPath("cotal")
	if err != nil {
		ts.Fatalf("find cotal: %v", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = os.Environ()
	for _, k := range []string{"HOME", "COTAL_HOME", "XDG_CONFIG_HOME", "WORK", "TMPDIR", "COTAL_SPAWN_WINDOW"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.errOut
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		ts.Fatalf("stdin: %v", err)
	}
	if err := cmd.Start(); err != nil {
		ts.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.m[name] = p
	ps.mu.Unlock()
}

func joinArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String()
}

// cmdHoldPort listens on a free loopback port until the script ends and sets $VAR to it;
// with -release it lets the port go at once, for a command that must bind it. A released
// port is never handed out again in the same script: the system may offer a port it just
// got back, and two nodes told the same port would collide.
//
//	holdport [-release] VAR
func cmdHoldPort(ts *testscript.TestScript, neg bool, args []string) {
	release := len(args) == 2 && args[0] == "-release"
	if release {
		args = args[1:]
	}
	if neg || len(args) != 1 {
		ts.Fatalf("usage: holdport [-release] VAR")
	}
	const releasedVar = "HOLDPORT_RELEASED" // ports this script released, ",p1,p2,"
	released := ts.Getenv(releasedVar)
	var refused []net.Listener
	defer func() {
		for _, r := range refused {
			_ = r.Close()
		}
	}()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ts.Fatalf("listen: %v", err)
		}
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		if strings.Contains(released, ","+port+",") {
			refused = append(refused, l) // held until a new port is found, so it is not offered again
			continue
		}
		ts.Setenv(args[0], port)
		if release {
			_ = l.Close()
			ts.Setenv(releasedVar, cmp.Or(released, ",")+port+",")
			return
		}
		ts.Defer(func() { _ = l.Close() })
		return
	}
}

// cmdRawNATS checks an ACL with raw nats.go, independent of cotal's client:
//
//	rawnats CREDS URLFILE pub SUBJECT   publish; succeed only if the broker accepts it
//	rawnats CREDS URLFILE sub SUBJECT   subscribe; succeed only if the broker accepts it
//
// URLFILE is a mesh.json whose server field names the broker. With !, the broker must
// refuse (a permissions violation, reported on stdout).
func cmdRawNATS(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 4 || (args[2] != "pub" && args[2] != "sub") {
		ts.Fatalf("usage: rawnats CREDS MESHJSON pub|sub SUBJECT")
	}
	var mesh struct {
		Server string `json:"server"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[1])), &mesh); err != nil {
		ts.Fatalf("read %s: %v", args[1], err)
	}
	// Quiet handler: the refusal is read back with LastError, which the reader sets before
	// it handles the PONG that ends Flush (the broker sends -ERR first).
	nc, err := nats.Connect(mesh.Server, nats.UserCredentials(ts.MkAbs(args[0])),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		ts.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	if args[2] == "pub" {
		err = nc.Publish(args[3], []byte("{}"))
	} else {
		_, err = nc.SubscribeSync(args[3])
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		ts.Fatalf("%s %s: %v", args[2], args[3], err)
	}
	if err := nc.LastError(); err != nil {
		fmt.Fprintf(ts.Stdout(), "refused: %v\n", err)
		if !neg {
			ts.Fatalf("the broker refused %s %s: %v", args[2], args[3], err)
		}
		return
	}
	fmt.Fprintf(ts.Stdout(), "accepted: %s %s\n", args[2], args[3])
	if neg {
		ts.Fatalf("the broker accepted %s %s", args[2], args[3])
	}
}

// cmdKillPid SIGKILLs the process whose pid is the first line of FILE and then waits, up
// to SECONDS, until FILE names another live process (a supervisor restarted it):
//
//	killpid FILE SECONDS
func cmdKillPid(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: killpid FILE SECONDS")
	}
	pidOf := func() int { return pidIn(ts, args[0]) }
	old := pidOf()
	if old <= 0 {
		ts.Fatalf("no pid in %s", args[0])
	}
	if err := signalPid(old, syscall.SIGKILL); err != nil {
		ts.Fatalf("kill %d: %v", old, err)
	}
	secs, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("seconds: %v", err)
	}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(deadline) {
		if pid := pidOf(); pid > 0 && pid != old && signalPid(pid, 0) == nil {
			fmt.Fprintf(ts.Stdout(), "restarted: %d -> %d\n", old, pid)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("%s still names %d (or nothing) after %s", args[0], old, args[1]+"s")
}

// pidIn is the pid on the first line of the pidfile f, 0 when there is none.
func pidIn(ts *testscript.TestScript, f string) int {
	b, err := os.ReadFile(ts.MkAbs(f))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(bytes.TrimSpace(bytes.SplitN(b, []byte("\n"), 2)[0])))
	return pid
}

// cmdCrash SIGKILLs at once every process named by the first line of each FILE, as a
// machine crash would end them, and waits until all are gone:
//
//	crash FILE...
func cmdCrash(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: crash FILE...")
	}
	var pids []int
	for _, f := range args {
		pid := pidIn(ts, f)
		if pid <= 0 {
			ts.Fatalf("crash: no pid in %s", f)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if err := signalPid(pid, syscall.SIGKILL); err != nil {
			ts.Fatalf("kill %d: %v", pid, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		alive := 0
		for _, pid := range pids {
			if signalPid(pid, 0) == nil {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("crash: %d process(es) still alive", alive)
		}
	}
}

// cmdSHA256 prints the lowercase hex SHA-256 of a file and a newline (what a space host
// writes to <manifest>.applied).
func cmdSHA256(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sha256 FILE")
	}
	sum := sha256.Sum256([]byte(ts.ReadFile(args[0])))
	fmt.Fprintln(ts.Stdout(), hex.EncodeToString(sum[:]))
}

// cmdWaitCmp waits up to procGuard until FILE exists with the content of WANT.
func cmdWaitCmp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitcmp FILE WANT")
	}
	want := ts.ReadFile(args[1])
	deadline := time.Now().Add(procGuard)
	for {
		got, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s is %q (%v), want %q", args[0], got, err, want)
		}
		time.Sleep(50 * time.Millisecond) // re-check interval
	}
}

// cmdIdP starts a loopback OIDC issuer (oidctest) in this test process, sets $VAR to its
// issuer URL, and stops it when the script ends:
//
//	idp start VAR [SUBJECT]   approve every device login for SUBJECT (default alice) after one poll
//	idp deny VAR              deny every device login after one poll
//
// cmdRefIdP starts an IdP of the kind the TypeScript reference pins (oidctest.RefIdP:
// Better Auth's routes under /api/auth, EdDSA tokens with iss = aud = the origin) that
// approves every device login for SUBJECT (default alice): refidp start VAR [SUBJECT]
// sets VAR to its base URL and VAR_ORIGIN to its origin.
func cmdRefIdP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 || args[0] != "start" {
		ts.Fatalf("usage: refidp start VAR [SUBJECT]")
	}
	p := &oidctest.RefIdP{AutoApprove: "alice"}
	if len(args) == 3 {
		p.AutoApprove = args[2]
	}
	if err := p.Start(); err != nil {
		ts.Fatalf("start reference idp: %v", err)
	}
	ts.Defer(func() {
		if err := p.Close(); err != nil {
			ts.Logf("close reference idp: %v", err)
		}
	})
	ts.Setenv(args[1], p.URL)
	ts.Setenv(args[1]+"_ORIGIN", p.Origin)
}

func cmdIdP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 || (args[0] != "start" && args[0] != "deny") || (args[0] == "deny" && len(args) != 2) {
		ts.Fatalf("usage: idp start VAR [SUBJECT] | idp deny VAR")
	}
	iss := &oidctest.Issuer{AutoApprove: "alice"}
	if len(args) == 3 {
		iss.AutoApprove = args[2]
	}
	if args[0] == "deny" {
		iss.AutoApprove, iss.AutoDeny = "", true
	}
	if err := iss.Start(); err != nil {
		ts.Fatalf("start idp: %v", err)
	}
	ts.Defer(func() {
		if err := iss.Close(); err != nil {
			ts.Logf("close idp: %v", err)
		}
	})
	ts.Setenv(args[1], iss.URL)
}

// cmdPosts posts N numbered texts (PREFIX000, PREFIX001, ...) to CHANNEL on the default
// space of the open mesh .cotal/mesh.json records, as the actor poster, in one connection:
//
//	posts N CHANNEL PREFIX
func cmdPosts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: posts N CHANNEL PREFIX")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("posts: %v", err)
	}
	var mesh struct {
		Server string   `json:"server"`
		Spaces []string `json:"spaces"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(".cotal/mesh.json")), &mesh); err != nil || len(mesh.Spaces) == 0 {
		ts.Fatalf("read .cotal/mesh.json: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := client.Connect(ctx, mesh.Server, client.Config{Space: mesh.Spaces[0], Name: "poster"})
	if err != nil {
		ts.Fatalf("posts: %v", err)
	}
	defer func() { _ = ep.Close() }()
	for i := range n {
		if _, err := ep.Post(ctx, args[1], client.Text(fmt.Sprintf("%s%03d", args[2], i))); err != nil {
			ts.Fatalf("post %d: %v", i, err)
		}
	}
}
