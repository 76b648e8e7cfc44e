package manager_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/workspace"
)

const space = "main"

// seatEnv makes the test binary run as a seat's program (seatProgram) instead of the tests.
const seatEnv = "MANAGERTEST_SEAT"

func TestMain(m *testing.M) {
	if os.Getenv(seatEnv) != "" {
		os.Exit(seatProgram(os.Args[1:]))
	}
	if os.Getenv(hostEnv) != "" {
		os.Exit(hostProcess())
	}
	os.Exit(m.Run())
}

// seatProgram is a seat's process in these tests:
//
//	join        join the mesh as $COTAL_NAME, print "seat ready", then echo each line
//	            typed as "got: LINE" until its terminal closes or SIGTERM
//	exit N      print "oops" and exit N at once
//	mark PATH   write PATH, print "seat ready", and wait for SIGTERM
func seatProgram(args []string) int {
	if os.Getenv(runSeatEnv) != "" {
		return runSeat()
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch {
	case len(args) == 2 && args[0] == "exit":
		fmt.Println("oops")
		n, _ := strconv.Atoi(args[1])
		return n
	case len(args) == 2 && args[0] == "mark":
		if err := os.WriteFile(args[1], []byte("ran"), 0o600); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("seat ready")
		<-term
		return 143
	case len(args) == 1 && args[0] == "join":
		ep, err := client.Connect(context.Background(), os.Getenv("COTAL_SERVERS"),
			client.Config{Space: os.Getenv("COTAL_SPACE"), Name: os.Getenv("COTAL_NAME")})
		if err != nil {
			fmt.Println("connect:", err)
			return 1
		}
		defer func() { _ = ep.Close() }()
		if err := ep.Join(context.Background()); err != nil {
			fmt.Println("join:", err)
			return 1
		}
		fmt.Println("seat ready")
		lines := make(chan string)
		go func() {
			in := bufio.NewScanner(os.Stdin)
			for in.Scan() {
				lines <- in.Text()
			}
			close(lines)
		}()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return 0
				}
				fmt.Println("got:", strings.TrimSpace(l))
			case <-term:
				return 143
			}
		}
	}
	fmt.Println("usage: join | exit N | mark PATH")
	return 2
}

// rig is a manager of space on a real broker (an open mesh), run by the test, with a
// project in a temporary folder and the operator's client.
type rig struct {
	t    *testing.T
	url  string
	proj *workspace.Project
	m    *manager.Manager
	op   *mgrclient.Client
	exe  string
	stop context.CancelFunc
	done chan error
}

// newRig provisions space on a new broker, opens a project with the persona default, and
// starts a manager (tweak sets its fields first) once ready; it is stopped at cleanup.
func newRig(t *testing.T, tweak func(*manager.Manager)) *rig {
	t.Helper()
	srv := brokertest.Start(t)
	url := srv.ClientURL()
	nc := dial(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	r := &rig{t: t, url: url, proj: project(t), done: make(chan error, 1)}
	r.exe, err = os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r.op = &mgrclient.Client{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, Operator: true}
	r.m = &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, url, client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint})
		},
		Project: r.proj, Space: space, Servers: url, Exe: r.exe, Host: "testhost",
		Operator:  protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"},
		Environ:   func() []string { return append(os.Environ(), seatEnv+"=1") },
		Window:    20 * time.Second,
		StopGrace: 10 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	if tweak != nil {
		tweak(r.m)
	}
	r.start()
	return r
}

// start runs the manager until cleanup and waits until it serves.
func (r *rig) start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	ready, ended := make(chan struct{}), make(chan struct{})
	go func() { defer close(ended); r.done <- r.m.Run(ctx, func() { close(ready) }) }()
	r.t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			r.t.Error("the manager did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-r.done:
		r.t.Fatalf("manager: %v", err)
	case <-time.After(20 * time.Second):
		r.t.Fatal("the manager did not serve")
	}
}

func project(t *testing.T) *workspace.Project {
	t.Helper()
	proj, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := proj.WritePersona(&workspace.Persona{Name: "default", Prompt: "You help."}); err != nil {
		t.Fatal(err)
	}
	return proj
}

// seat is the spawn of a seat named name running seatProgram with args, on the
// operator's rail.
func (r *rig) seat(name string, wait bool, args ...string) protocol.SpawnArgs {
	return protocol.SpawnArgs{Name: name, Agent: "command", Args: append([]string{r.exe}, args...), Wait: wait}
}

func (r *rig) call(op string, args, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.op.Call(ctx, op, args, out)
}

func (r *rig) ps(name string) (protocol.SeatInfo, bool) {
	r.t.Helper()
	var res protocol.PsResult
	if err := r.call(protocol.MgrPs, protocol.NameArgs{Name: name}, &res); err != nil {
		r.t.Fatalf("ps: %v", err)
	}
	if len(res.Seats) == 0 {
		return protocol.SeatInfo{}, false
	}
	return res.Seats[0], true
}

func (r *rig) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(r.proj.Dir(), "logs", "agents", name+".log"))
	return string(b)
}

func dial(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestSeatLifecycle: a spawn runs the program in a seat and settles once it joins; ps
// shows it running, input types into its terminal, attach repaints its screen, and stop
// ends it (SIGTERM) and removes its run folder.
func TestSeatLifecycle(t *testing.T) {
	r := newRig(t, nil)
	var res protocol.SpawnResult
	if err := r.call(protocol.MgrSpawn, r.seat("w", true, "join"), &res); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	if res.Name != "w" || res.Agent != "command" || res.Outcome != protocol.SettleSucceeded {
		t.Fatalf("spawn answered %+v", res)
	}
	info, ok := r.ps("w")
	if !ok || info.Process != protocol.SeatRunning || info.PID <= 0 || info.Mesh != string(protocol.StatusIdle) {
		t.Fatalf("ps: %+v", info)
	}
	meshtest.Until(t, "seat ready in the log", 10*time.Second, func() bool { return strings.Contains(r.log("w"), "seat ready") })

	var typed map[string]int
	if err := r.call(protocol.MgrInput, protocol.InputArgs{Name: "w", Data: []byte("hello seat\r")}, &typed); err != nil || typed["bytes"] != 11 {
		t.Fatalf("input: %v %v", typed, err)
	}
	meshtest.Until(t, "the typed line echoed", 10*time.Second, func() bool { return strings.Contains(r.log("w"), "got: hello seat") })

	var att protocol.AttachResult
	err := r.op.CallAt(t.Context(), protocol.MgrAttach, "sess1", protocol.AttachArgs{Name: "w", Session: "sess1"}, &att)
	if err != nil || !strings.Contains(string(att.Screen), "got: hello seat") || att.TTLMs <= 0 {
		t.Fatalf("attach: %q ttl %d, %v", att.Screen, att.TTLMs, err)
	}

	var stopped protocol.SeatInfo
	if err := r.call(protocol.MgrStop, protocol.NameArgs{Name: "w"}, &stopped); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if stopped.Process != protocol.SeatExited || stopped.Code == nil || *stopped.Code != 143 {
		t.Fatalf("stopped: %+v", stopped)
	}
	if _, err := os.Stat(filepath.Join(r.proj.Dir(), "run", "w")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the run folder outlived the seat: %v", err)
	}
	var me *mgrclient.Error
	if err := r.call(protocol.MgrStop, protocol.NameArgs{Name: "nobody"}, nil); !errors.As(err, &me) || me.Code != protocol.MgrCodeNotFound {
		t.Fatalf("stop nobody: %v", err)
	}
}

// blockLookPath makes the manager's LookPath wait, once it has been called, until release
// is closed: the seat stays starting meanwhile.
func blockLookPath(m *manager.Manager, called chan<- struct{}, release <-chan struct{}) {
	m.LookPath = func(file string) (string, error) {
		called <- struct{}{}
		<-release
		return file, nil
	}
}

// waitCalled waits until the blocked LookPath is called, failing on an early spawn answer.
func waitCalled(t *testing.T, called <-chan struct{}, spawned <-chan error) {
	t.Helper()
	select {
	case <-called:
	case err := <-spawned:
		t.Fatalf("spawn answered before its start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the spawn never reached LookPath")
	}
}

// TestStopWhileStarting: a stop of a seat still starting (no process yet, pid 0) signals
// nothing (kill(-0) would reach the manager's own process group), cancels the start, and
// the program never runs.
func TestStopWhileStarting(t *testing.T) {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)

	called, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, func(m *manager.Manager) { blockLookPath(m, called, release) })
	marker := filepath.Join(t.TempDir(), "ran")
	spawned := make(chan error, 1)
	go func() { spawned <- r.call(protocol.MgrSpawn, r.seat("s", false, "mark", marker), nil) }()
	waitCalled(t, called, spawned)
	if info, _ := r.ps("s"); info.Process != protocol.SeatStarting || info.PID != 0 {
		t.Fatalf("seat while starting: %+v", info)
	}
	stopped := make(chan error, 1)
	var after protocol.SeatInfo
	go func() { stopped <- r.call(protocol.MgrStop, protocol.NameArgs{Name: "s"}, &after) }()
	meshtest.Until(t, "the seat stopping", 10*time.Second, func() bool {
		info, _ := r.ps("s")
		return info.Process == protocol.SeatStopping
	})
	select {
	case s := <-sig:
		t.Fatalf("the manager's own process got %v from a stop of a starting seat", s)
	default:
	}
	close(release)
	var me *mgrclient.Error
	if err := <-spawned; !errors.As(err, &me) || me.Code != protocol.MgrCodeStopped {
		t.Fatalf("spawn answered %v, want a refusal with code %s", err, protocol.MgrCodeStopped)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if after.Process != protocol.SeatExited || after.PID != 0 {
		t.Fatalf("after stop: %+v", after)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the seat's program ran after its stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.proj.Dir(), "run", "s")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the run folder outlived the cancelled start: %v", err)
	}
	select {
	case s := <-sig:
		t.Fatalf("the manager's own process got %v", s)
	default:
	}
}

// TestPsWhileStarting: ps reads a seat while its start writes it (model, role, pid):
// run with -race, every write is under the seat's lock.
func TestPsWhileStarting(t *testing.T) {
	called, release := make(chan struct{}, 1), make(chan struct{})
	r := newRig(t, func(m *manager.Manager) { blockLookPath(m, called, release) })
	spawned := make(chan error, 1)
	go func() { spawned <- r.call(protocol.MgrSpawn, r.seat("p", false, "join"), nil) }()
	waitCalled(t, called, spawned)
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan int)
	go func() {
		n := 0
		for ctx.Err() == nil {
			var res protocol.PsResult
			if r.op.Call(ctx, protocol.MgrPs, protocol.NameArgs{}, &res) == nil {
				n++
			}
		}
		polled <- n
	}()
	close(release)
	err := <-spawned
	cancel()
	if n := <-polled; n == 0 {
		t.Fatal("no ps answered while the seat started")
	}
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	meshtest.Until(t, "the seat running", 10*time.Second, func() bool {
		info, _ := r.ps("p")
		return info.Process == protocol.SeatRunning
	})
}

// TestEndedSeatsArePruned: ps keeps the KeepEnded most recently ended seats and forgets
// the older ones; running seats are all kept.
func TestEndedSeatsArePruned(t *testing.T) {
	r := newRig(t, func(m *manager.Manager) { m.KeepEnded = 2 })
	if err := r.call(protocol.MgrSpawn, r.seat("live", true, "join"), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := "f" + strconv.Itoa(i)
		var res protocol.SpawnResult
		if err := r.call(protocol.MgrSpawn, r.seat(name, true, "exit", "3"), &res); err != nil || res.Outcome != protocol.SettleFailed {
			t.Fatalf("spawn %s: %+v %v", name, res, err)
		}
	}
	var res protocol.PsResult
	if err := r.call(protocol.MgrPs, protocol.NameArgs{}, &res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Seats {
		names = append(names, s.Name+":"+string(s.Process))
	}
	if got, want := strings.Join(names, " "), "f3:exited f4:exited live:running"; got != want {
		t.Fatalf("ps lists %s, want %s", got, want)
	}
}

// TestAdoptRemovesOnlyInsideItsFolders: a seat record left in a run folder names files
// anywhere for removal (by absolute path, by .., through a symbolic link); the manager
// that reads it removes the ended seat's run folder and nothing outside it.
func TestAdoptRemovesOnlyInsideItsFolders(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	var proj *workspace.Project
	rg := newRigWith(t, func(p *workspace.Project) {
		proj = p
		dir := filepath.Join(p.Dir(), "run", "x")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, victim)
		if err != nil {
			t.Fatal(err)
		}
		rec := fmt.Sprintf(`{"info":{"name":"x","persona":"default","agent":"codex","pid":1,"process":"running"},"start":"not the start of pid 1","remove":[%q,%q,%q,%q]}`,
			victim, filepath.Join(dir, rel), rel, filepath.Join(dir, "out", "victim"))
		if err := os.WriteFile(filepath.Join(dir, "seat.json"), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		// A run folder that is a symbolic link is not a seat's: it is never read.
		if err := os.Symlink(outside, filepath.Join(p.Dir(), "run", "y")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "seat.json"), []byte(strings.ReplaceAll(rec, `"x"`, `"y"`)), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	info, ok := rg.ps("x")
	if !ok || info.Process != protocol.SeatExited || !info.Adopted {
		t.Fatalf("ps x: %+v %v", info, ok)
	}
	if _, ok := rg.ps("y"); ok {
		t.Fatal("a run folder that is a symbolic link was adopted")
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Fatalf("the file outside the seat's folder: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "seat.json")); err != nil {
		t.Fatalf("the linked folder's file: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(proj.Dir(), "run", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ended seat's run folder is still there: %v", err)
	}
}

// newRigWith is newRig with the project prepared by before the manager starts.
func newRigWith(t *testing.T, before func(*workspace.Project)) *rig {
	t.Helper()
	return newRig(t, func(m *manager.Manager) { before(m.Project) })
}

// TestRunWithoutReady: Run takes a nil ready.
func TestRunWithoutReady(t *testing.T) {
	srv := brokertest.Start(t)
	nc := dial(t, srv.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	m := &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, srv.ClientURL(), client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint})
		},
		Project: project(t), Space: space, Servers: srv.ClientURL(), Exe: exe,
		Operator: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, nil) }()
	// It serves: ps answers.
	op := &mgrclient.Client{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, Operator: true}
	meshtest.Until(t, "the manager answering", 20*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run: %v", err)
		default:
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		defer ccancel()
		return op.Call(cctx, protocol.MgrPs, protocol.NameArgs{}, nil) == nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
