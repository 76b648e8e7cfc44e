package manager_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/workspace"
)

// The hosting manager as a process of its own, SIGKILLed with a seat effect of a run
// journaled pending and not settled (run hosting in runs.go).
const (
	hostEnv     = "MANAGERTEST_RUNHOST"        // the test binary runs hostProcess
	hostURL     = "MANAGERTEST_RUNHOST_URL"    // the broker
	hostRoot    = "MANAGERTEST_RUNHOST_ROOT"   // the project's root
	hostKillAt  = "MANAGERTEST_RUNHOST_AT"     // the step key the host stops at, before its settle
	hostMark    = "MANAGERTEST_RUNHOST_MARK"   // written once the host stopped there
	hostReady   = "MANAGERTEST_RUNHOST_READY"  // written once the manager serves
	hostNotice  = "MANAGERTEST_RUNHOST_NOTICE" // "before": the host stops before it tells a seat of a turn, "sent": after, before it records that
	hostGate    = "MANAGERTEST_RUNHOST_GATE"   // a folder: the host's drive writes <gate>/reached at a turn and hands it once <gate>/open exists
	killTimeout = 90 * time.Second             // a hang guard per wait, not a timing assertion
)

// hostProcess is a manager hosting runs on the broker $MANAGERTEST_RUNHOST_URL, run as
// `cotal up` runs it: its own process, until SIGTERM. Its persona worker runs in the
// claude harness, launched as runSeat. With $MANAGERTEST_RUNHOST_AT set, the drive that
// performed that step writes $MANAGERTEST_RUNHOST_MARK and stops before the step's settle
// is appended, for ever: the test kills the process there.
func hostProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	url, out := os.Getenv(hostURL), os.Getenv(runSeatOut)
	proj, err := workspace.Open(os.Getenv(hostRoot))
	if err != nil {
		fmt.Fprintln(os.Stderr, "project:", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "executable:", err)
		return 1
	}
	at, mark := os.Getenv(hostKillAt), os.Getenv(hostMark)
	m := &manager.Manager{
		Connect: func(ctx context.Context) (*client.Endpoint, error) {
			return client.Connect(ctx, url, client.Config{Space: space, Name: "manager", Kind: protocol.CardEndpoint})
		},
		Project: proj, Space: space, Servers: url, Exe: exe, Host: "testhost",
		Operator: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"},
		Environ: func() []string {
			return append(os.Environ(), seatEnv+"=1", runSeatEnv+"=1", runSeatOut+"="+out)
		},
		LookPath: func(name string) (string, error) {
			if name == "claude" {
				return exe, nil
			}
			return "", errors.New("not installed")
		},
		Window: 30 * time.Second, StopGrace: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		TurnNotice: func(goal string, sent bool) {
			if at := os.Getenv(hostNotice); at == "" || (at == "sent") != sent {
				return
			}
			if err := os.WriteFile(mark, []byte(goal), 0o600); err != nil {
				fmt.Fprintln(os.Stderr, "mark:", err)
			}
			select {} // held here until the test kills the process
		},
		RunConfig: func(c *rundriver.Config) {
			if gate := os.Getenv(hostGate); gate != "" {
				c.Seats = gatedSeats{Seats: c.Seats, dir: gate}
			}
			c.BeforeSettle = func(key string) {
				if at == "" || key != at {
					return
				}
				if err := os.WriteFile(mark, []byte(key), 0o600); err != nil {
					fmt.Fprintln(os.Stderr, "mark:", err)
				}
				select {} // held here until the test kills the process
			}
		},
	}
	err = m.Run(ctx, func() {
		if err := os.WriteFile(os.Getenv(hostReady), []byte("ready"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "ready:", err)
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return 0
}

// gatedSeats holds each turn of the drive until <dir>/open exists, having written
// <dir>/reached: the turn is not handed (its goal not held) before the test says so.
type gatedSeats struct {
	rundriver.Seats
	dir string
}

func (g gatedSeats) Turn(ctx context.Context, r rundriver.TurnRequest) (rundriver.TurnResult, error) {
	if err := os.WriteFile(filepath.Join(g.dir, "reached"), []byte(r.GoalID), 0o600); err != nil {
		return rundriver.TurnResult{}, err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(g.dir, "open")); err == nil {
			return g.Seats.Turn(ctx, r)
		}
		select {
		case <-ctx.Done():
			return rundriver.TurnResult{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// killRig is a broker, a project with the persona worker, and the hosting manager's
// processes, one at a time.
type killRig struct {
	t   *testing.T
	url string
	dir string // the test's own files: markers, logs
	out string // what the seats report
	js  jetstream.JetStream
	op  *mgrclient.Client
	ep  *mgrclient.EPCaller

	root   string
	host   *exec.Cmd
	n      int
	notice string // the next host stops before it tells a seat of a turn ("before") or after ("sent")
	gate   string // the next host holds its turns at this folder (gatedSeats); "" none
}

func newKillRig(t *testing.T) *killRig {
	t.Helper()
	srv := brokertest.Start(t)
	k := &killRig{t: t, url: srv.ClientURL(), dir: t.TempDir(), out: t.TempDir()}
	nc := dial(t, k.url)
	var err error
	if k.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), k.js, space, provision.Options{DefaultDeliveryClass: "live"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	proj := project(t)
	if err := proj.WritePersona(&workspace.Persona{Name: "worker", Agent: "claude", Prompt: "You work."}); err != nil {
		t.Fatal(err)
	}
	k.root = proj.Root
	root := protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}
	k.op = &mgrclient.Client{NC: nc, Space: space, Caller: root, Operator: true}
	k.ep = &mgrclient.EPCaller{NC: nc, Space: space, Caller: root, UID: "opcaller00000000000000000000"}
	t.Cleanup(k.cleanup)
	return k
}

// startHost starts the next manager process, stopping at the step key at ("" never),
// and waits until it serves.
func (k *killRig) startHost(at string) {
	k.t.Helper()
	k.n++
	ready := filepath.Join(k.dir, fmt.Sprintf("ready.%d", k.n))
	logf, err := os.Create(filepath.Join(k.dir, fmt.Sprintf("host.%d.log", k.n)))
	if err != nil {
		k.t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	exe, err := os.Executable()
	if err != nil {
		k.t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), hostEnv+"=1", hostURL+"="+k.url, hostRoot+"="+k.root, hostKillAt+"="+at, hostNotice+"="+k.notice, hostGate+"="+k.gate,
		hostMark+"="+filepath.Join(k.dir, "mark"), hostReady+"="+ready, runSeatOut+"="+k.out)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.host = cmd
	meshtest.Until(k.t, fmt.Sprintf("manager process %d serves", k.n), killTimeout, func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
}

// kill SIGKILLs the manager process: nothing of it runs after, no cleanup, no status write.
func (k *killRig) kill() {
	k.t.Helper()
	if err := k.host.Process.Kill(); err != nil {
		k.t.Fatal(err)
	}
	_ = k.host.Wait()
	k.host = nil
}

// cleanup stops the run's seats through the manager, then the manager, and logs the
// manager processes' logs when the test failed.
func (k *killRig) cleanup() {
	if k.host != nil {
		var ps protocol.PsResult
		if k.op.Call(context.Background(), protocol.MgrPs, protocol.NameArgs{}, &ps) == nil {
			for _, s := range ps.Seats {
				if !s.Process.Ended() {
					_ = k.op.Call(context.Background(), protocol.MgrStop, protocol.NameArgs{Name: s.Name, Force: true}, nil)
				}
			}
		}
		_ = k.host.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = k.host.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = k.host.Process.Kill()
			<-done
		}
	}
	if k.t.Failed() {
		for i := 1; i <= k.n; i++ {
			b, _ := os.ReadFile(filepath.Join(k.dir, fmt.Sprintf("host.%d.log", i)))
			k.t.Logf("manager process %d:\n%s", i, b)
		}
	}
}

func (k *killRig) status(run string) runstore.RunStatus {
	k.t.Helper()
	recs, err := runstore.OpenRecords(k.t.Context(), k.js, space)
	if err != nil {
		k.t.Fatal(err)
	}
	var st runstore.RunStatus
	if _, err := recs.Get(k.t.Context(), runstore.RunStatusKey(runstore.DefaultEndpoint, run), &st); err != nil {
		k.t.Fatalf("status of %s: %v", run, err)
	}
	return st
}

func (k *killRig) journal(run string) []runstore.Record {
	k.t.Helper()
	recs, _, err := runstore.Replay(k.t.Context(), k.js, space, run)
	if err != nil {
		k.t.Fatal(err)
	}
	return recs
}

// checkHanded checks the seat's report: each turn (by goal) handed and yielded as want says.
func checkHanded(t *testing.T, k *killRig, seat string, want map[string]int) {
	t.Helper()
	for what, f := range map[string]string{"handed": ".handed", "yielded": ".yields"} {
		got := map[string]int{}
		for _, l := range k.lines(seat + f) {
			got[l]++
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("turns %s to the seat, by goal: %v; want %v", what, got, want)
		}
	}
}

// answer files the operator's answer to the checkpoint token.
func (k *killRig) answer(token string) {
	k.t.Helper()
	recs, err := runstore.OpenRecords(k.t.Context(), k.js, space)
	if err != nil {
		k.t.Fatal(err)
	}
	id, err := runstore.AnswerID(token, "local.root", "yes", "")
	if err != nil {
		k.t.Fatal(err)
	}
	if err := recs.Create(k.t.Context(), runstore.AnswerKey(runstore.DefaultEndpoint, token, id),
		runstore.Answer{V: 1, Token: token, AnswerID: id, Value: json.RawMessage(`"yes"`), By: "local.root", At: time.Now().UnixMilli()}); err != nil {
		k.t.Fatal(err)
	}
}

// hostedHolder is the holder id of a hosted attempt.
var hostedHolder = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[0-9a-f]{16}$`)

// killProgramSource is seatProgramSource ending at a checkpoint the test answers.
const killProgramSource = seatProgramSource + `
await checkpoint("end", "Done?");`

// entriesOf are the journal's entries of key: pending ones and settled ones.
func entriesOf(journal []runstore.Record, key string) (pending, settled []runstore.Entry) {
	for _, r := range journal {
		if r.Entry != nil && r.Entry.Key() == key {
			if r.Entry.State == "pending" {
				pending = append(pending, *r.Entry)
			} else {
				settled = append(settled, *r.Entry)
			}
		}
	}
	return pending, settled
}

// lines are the lines of the seat report file name (none when it is missing).
func (k *killRig) lines(name string) []string {
	b, err := os.ReadFile(filepath.Join(k.out, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		k.t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// Every seat effect of a hosted run is performed once across a SIGKILL of the manager
// process driving it, landing after the effect was performed and before its settle was
// appended (the process holds there until killed): the next manager process takes the
// run back (epoch 2), the step completes, and the journal holds the step's pending
// records under one request id and one settle; the seat's process was started once, its
// turn and its ask were each handed and yielded once, the answer filed once. A resume
// while the new manager drives the run is refused and appends nothing.
//
// wait(replied(...)) the same: killed before the wait settles, the next manager resolves
// it from the turn the journal holds settled, and the seat yields once.
func TestHostedSeatEffectsExactlyOnceAcrossManagerSIGKILL(t *testing.T) {
	seatSteps := []string{"/spawn:worker#0", "/turn:work#0", "/ask:report#0"}
	for _, key := range seatSteps {
		t.Run(strings.Trim(key, "/#0"), func(t *testing.T) {
			killAndTakeBack(t, killProgramSource, key, seatSteps)
		})
	}
	t.Run("wait:replied", func(t *testing.T) {
		killAndTakeBack(t, repliedProgramSource, "/parallel#0/b:r/wait:seen#0", []string{"/spawn:worker#0", "/parallel#0/b:t/turn:work#0", "/parallel#0/b:r/wait:seen#0"})
	})
}

// repliedProgramSource waits for its seat's reply beside the turn, then at a checkpoint
// the test answers.
const repliedProgramSource = `const w = await spawn("worker");
const both = await parallel({ t: () => turn(w, { name: "work", deadline: "5m" }), r: () => wait(replied(w), { name: "seen", timeout: "5m" }) });
log("replied " + both.r.status + " " + both.r.note);
await checkpoint("end", "Done?");`

// killAndTakeBack starts program on a manager process that stops before the settle of
// key and is SIGKILLed there, lets the next manager process take the run back and
// complete it, and checks each of steps was performed and settled once.
func killAndTakeBack(t *testing.T, program, key string, steps []string) {
	k := newKillRig(t)
	k.startHost(key)
	var started struct {
		RunID string `json:"runId"`
	}
	if _, err := k.ep.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": program}}, &started); err != nil {
		t.Fatalf("run-start: %v", err)
	}
	run := started.RunID
	meshtest.Until(t, "the manager holds before the settle of "+key, killTimeout, func() bool {
		_, err := os.Stat(filepath.Join(k.dir, "mark"))
		return err == nil
	})
	k.kill()
	if p, s := entriesOf(k.journal(run), key); len(p) == 0 || len(s) != 0 {
		t.Fatalf("after the kill %s has %d pending, %d settled records; want pending only", key, len(p), len(s))
	}
	if st := k.status(run); st.State != runstore.StateRunning || st.Epoch != 1 {
		t.Fatalf("status after the kill %+v; want running at epoch 1", st)
	}

	k.startHost("")
	meshtest.Until(t, "the new manager holds the run at epoch 2", killTimeout, func() bool {
		st := k.status(run)
		return st.Epoch == 2 && st.FencingToken == 2
	})
	// The run waits at its last step, a checkpoint, driven: a resume is refused.
	var cp []runstore.Entry
	meshtest.Until(t, "the run waits at its checkpoint", killTimeout, func() bool {
		cp, _ = entriesOf(k.journal(run), "/checkpoint:end#0")
		return len(cp) == 2
	})
	var me *mgrclient.Error
	if _, err := k.ep.Call(t.Context(), mgrclient.EPCall{Command: "run-resume", Args: map[string]any{"runId": run}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPConflict {
		t.Fatalf("a second resume while the manager drives the run: %v; want conflict", err)
	}
	k.answer(rundriver.Token(cp[1]))
	meshtest.Until(t, "the run completes", killTimeout, func() bool {
		return k.status(run).State == runstore.StateCompleted
	})

	// Each attempt activated under a holder of its own: the manager process and
	// a takeover id, <instance>.<16 hex>.
	journal := k.journal(run)
	var holders []string
	for _, r := range journal {
		if r.Activation != nil {
			holders = append(holders, r.Activation.Holder)
		}
	}
	if len(holders) != 2 {
		t.Fatalf("the journal holds %d activations; want the start's and the takeover's", len(holders))
	}
	for _, h := range holders {
		if !hostedHolder.MatchString(h) {
			t.Fatalf("holder %q is not <manager instance>.<16 hex>", h)
		}
	}
	if holders[0] == holders[1] {
		t.Fatalf("both attempts activated as %s", holders[0])
	}
	for _, step := range steps {
		p, s := entriesOf(journal, step)
		if len(s) != 1 || s[0].Status != "ok" || len(p) == 0 {
			t.Fatalf("%s: %d pending, settled %+v; want one ok settle", step, len(p), s)
		}
		for _, e := range append(p, s...) {
			if e.RequestID != s[0].RequestID {
				t.Fatalf("%s was journaled under request ids %s and %s", step, e.RequestID, s[0].RequestID)
			}
		}
	}
	_, turn := entriesOf(journal, steps[1])
	var tr map[string]any
	if err := json.Unmarshal(turn[0].Result, &tr); err != nil || tr["status"] != "done" || tr["note"] != "did it" {
		t.Fatalf("the turn settled %s", turn[0].Result)
	}

	var ps protocol.PsResult
	if err := k.op.Call(t.Context(), protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil {
		t.Fatal(err)
	}
	var seats []protocol.SeatInfo
	for _, s := range ps.Seats {
		if s.Spawner == "local."+rundriver.RunCaller(run) {
			seats = append(seats, s)
		}
	}
	if len(seats) != 1 {
		t.Fatalf("the run has %d seats: %+v; want one", len(seats), seats)
	}
	seat := seats[0].Name
	if starts := k.lines(seat + ".starts"); len(starts) != 1 {
		t.Fatalf("the seat's process was started %d times; want once", len(starts))
	}
	want := map[string]int{turn[0].RequestID: 1}
	_, ask := entriesOf(journal, "/ask:report#0")
	if len(ask) == 0 {
		_, seen := entriesOf(journal, steps[2])
		if !strings.Contains(string(seen[0].Result), `"status":"done"`) {
			t.Fatalf("wait(replied) settled %s", seen[0].Result)
		}
		checkHanded(t, k, seat, want)
		return
	}
	if string(ask[0].Result) != `{"n":3,"ok":true}` {
		t.Fatalf("the ask settled %s", ask[0].Result)
	}
	askToken := rundriver.AskToken(ask[0].RequestID, 1)
	want[askToken] = 1
	checkHanded(t, k, seat, want)
	recs, err := runstore.OpenRecords(t.Context(), k.js, space)
	if err != nil {
		t.Fatal(err)
	}
	if answers, err := recs.Answers(t.Context(), runstore.DefaultEndpoint, askToken); err != nil || len(answers) != 1 || answers[0].By != "local."+seat {
		t.Fatalf("answers %+v, %v; want one by the seat", answers, err)
	}
}
