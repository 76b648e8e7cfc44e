package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// BenchmarkSeats compares starting seatsPerRound agents through the manager (`cotal spawn
// --detach`, all at once) with starting the same agents directly (`cotal spawn`, all at
// once), each a `command` seat running `cotal mcp` (which joins the roster and stays):
// the time from the first start until all are online in the roster, watched on the
// presence bucket. It reports the ratio manager/direct and the manager's resident
// memory per seat (VmRSS before and after, from /proc). Run:
//
//	go test -run '^$' -bench Seats -benchtime 1x -count 3 ./internal/cli/
func BenchmarkSeats(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc for the manager's resident memory")
	}
	exe, err := exec.LookPath("cotal")
	if err != nil {
		b.Fatalf("the cotal of the test binary is not on PATH: %v", err)
	}
	for i := 0; i < b.N; i++ {
		direct, managed, rss := seatsRound(b, exe)
		b.ReportMetric(managed.Seconds()/direct.Seconds(), "mgr/direct")
		b.ReportMetric(float64(managed.Milliseconds()), "mgr-ms")
		b.ReportMetric(float64(direct.Milliseconds()), "direct-ms")
		b.ReportMetric(float64(rss)/seatsPerRound, "KiB-rss/seat")
	}
}

const seatsPerRound = 20

func seatsRound(b *testing.B, exe string) (direct, managed time.Duration, rssPerRound int64) {
	b.StopTimer()
	dir := b.TempDir()
	env := append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "COTAL_HOME="+filepath.Join(dir, "home", ".cotal"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "home", ".config"), "COTAL_SPAWN_WINDOW=60s")
	run := func(args ...string) string {
		cmd := exec.Command(exe, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("cotal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const space = "bench"
	run("up", "--detach", "--server", "nats://127.0.0.1:0", "--space", space)
	defer run("down")
	run("personas", "new", "default", "--prompt", "You help.")
	run("mint", "watcher", "--profile", "observer", "--out", "watcher.creds")

	proj := &workspace.Project{Root: dir}
	mesh, err := proj.ReadMesh()
	if err != nil {
		b.Fatal(err)
	}
	w := watchRoster(b, mesh.Server, filepath.Join(dir, "watcher.creds"), space)
	defer w.stop()

	// Direct: 20 foreground spawns at once, each kept running by an open stdin.
	var stdins []*os.File
	var cmds []*exec.Cmd
	start := time.Now()
	for i := range seatsPerRound {
		r, wr, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe, "spawn", "--agent", "command", "--name", "d"+strconv.Itoa(i), "--", exe, "mcp")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, env, r
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		_ = r.Close()
		stdins, cmds = append(stdins, wr), append(cmds, cmd)
	}
	w.waitOnline(b, "d", seatsPerRound)
	direct = time.Since(start)
	for _, s := range stdins {
		_ = s.Close() // the agent's cotal mcp ends at end of input, and its spawn with it
	}
	for _, c := range cmds {
		_ = c.Wait()
	}

	// Managed: 20 spawn --detach at once; the manager's memory before and after.
	pid := managerPID(b, proj, space)
	before := vmRSS(b, pid)
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, seatsPerRound)
	for i := range seatsPerRound {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "spawn", "--detach", "--agent", "command", "--name", "m"+strconv.Itoa(i), "--", exe, "mcp")
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("spawn --detach m%d: %v\n%s", i, err, out)
			}
		}()
	}
	w.waitOnline(b, "m", seatsPerRound)
	managed = time.Since(start)
	after := vmRSS(b, pid)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return direct, managed, after - before
}

func managerPID(b *testing.B, proj *workspace.Project, space string) int {
	rec, err := workspace.ReadPidfile(proj.ManagerPidFile(space))
	if err != nil {
		b.Fatalf("manager pidfile: %v", err)
	}
	return rec.PID
}

// vmRSS is the resident memory of pid in KiB.
func vmRSS(b *testing.B, pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// rosterWatch follows presence (client.WatchPresence): which names are online.
type rosterWatch struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	mu     sync.Mutex
	online map[string]bool
	change chan struct{}
}

func watchRoster(b *testing.B, server, creds, space string) *rosterWatch {
	raw, err := os.ReadFile(creds)
	if err != nil {
		b.Fatal(err)
	}
	c, err := trust.ReadCreds(raw)
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(server, c.Options()...)
	if err != nil {
		b.Fatal(err)
	}
	ep, err := client.New(nc, client.Config{Space: space, Name: "watcher", Owner: c.Principal.Owner, Actor: c.Principal.Actor})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes, err := ep.WatchPresence(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rw := &rosterWatch{nc: nc, cancel: cancel, online: map[string]bool{}, change: make(chan struct{}, 1)}
	go func() {
		for ch := range changes {
			rw.mu.Lock()
			rw.online[ch.Card.Name] = ch.Online
			rw.mu.Unlock()
			select {
			case rw.change <- struct{}{}:
			default:
			}
		}
	}()
	return rw
}

// waitOnline waits until n names starting with prefix are online (a 2-minute hang guard).
func (rw *rosterWatch) waitOnline(b *testing.B, prefix string, n int) {
	guard := time.After(2 * time.Minute)
	for {
		rw.mu.Lock()
		count := 0
		for name, on := range rw.online {
			if on && strings.HasPrefix(name, prefix) {
				count++
			}
		}
		rw.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-rw.change:
		case <-guard:
			b.Fatalf("%d of %d %s* agents online after 2 minutes", count, n, prefix)
		}
	}
}

func (rw *rosterWatch) stop() {
	rw.cancel()
	rw.nc.Close()
}
