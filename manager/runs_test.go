package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/manager"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/rundriver"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/workspace"
)

// runSeatEnv makes a seat's process the run seat below, whatever arguments its harness
// launch gave it; runSeatOut is the folder it reports what it did in.
const (
	runSeatEnv = "MANAGERTEST_RUNSEAT"
	runSeatOut = "MANAGERTEST_RUNSEAT_OUT"
	// seatRelease and seatFence are the texts a slow seat acts on (runSeat).
	seatRelease = "RELEASE-THE-TURN"
	seatFence   = "FENCE-MESSAGE"
)

// runSeat is a seat of a workflow run: the agent's real MCP server (agentmcp, with the
// turn relay) and a real MCP client (the Go SDK's) standing in for the model. It waits
// for messages (the manager's turn notices), lists its turns with cotal_yield and ends
// each: a plain turn done with a note; an ask first with a record of the wrong type,
// which must be refused (the refusal is written to <out>/<name>.refused), then with
// {ok: true, n: 3}. Each yield that lands is written to <out>/<name>.<goal>. It appends
// a line to <out>/<name>.starts when its process starts, and the turn's id to
// <out>/<name>.handed for each turn message it reads and to <out>/<name>.yields for each
// yield it makes (the ask's deliberately wrong one aside). It outlives its terminal (a hangup is ignored), as a seat of a
// manager that is killed does until the next manager adopts it.
//
// A seat whose name starts with "slow" notes each turn message it reads and yields
// nothing until a message holds seatRelease: then it yields the turn it read last, done,
// and notes the answer to <out>/<name>.released (or the refusal to .refusals). A message
// holding seatFence it notes to <out>/<name>.fences.
func runSeat() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	signal.Ignore(syscall.SIGHUP)
	// The harness's MCP configuration (--mcp-config=PATH) names the agent and its mesh.
	env := map[string]string{}
	for _, a := range os.Args[1:] {
		if p, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			var cfg struct {
				MCPServers map[string]struct {
					Env map[string]string `json:"env"`
				} `json:"mcpServers"`
			}
			if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &cfg) == nil {
				env = cfg.MCPServers["cotal"].Env
			}
		}
	}
	name, out := env["COTAL_NAME"], os.Getenv(runSeatOut)
	note := func(file, line string) {
		f, err := os.OpenFile(filepath.Join(out, name+file), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_, _ = fmt.Fprintln(f, line)
			_ = f.Close()
		}
	}
	note(".starts", strconv.Itoa(os.Getpid()))
	ep, err := client.Connect(ctx, env["COTAL_SERVERS"], client.Config{Space: env["COTAL_SPACE"], Name: name})
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	defer func() { _ = ep.Close() }()
	st, ct := mcp.NewInMemoryTransports()
	srv := &agentmcp.Server{Endpoint: ep, Turns: &mgrclient.Client{NC: ep.Conn(), Space: ep.Space(), Caller: ep.Principal()}}
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		fmt.Println("mcp:", err)
		return 1
	}
	fmt.Println("seat ready")
	if strings.HasPrefix(name, "idle") {
		<-ctx.Done() // a seat that never yields
		return 0
	}
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	turnRE := regexp.MustCompile(`it is your turn "([^"]+)"`)
	held := "" // a slow seat's turn, the last it read
	for ctx.Err() == nil {
		res, err := call("cotal_wait", map[string]any{"timeout": 5})
		if err != nil || res.IsError {
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var got struct {
			Messages []agentmcp.Item `json:"messages"`
		}
		_ = json.Unmarshal(raw, &got)
		for _, m := range got.Messages {
			if slow := strings.HasPrefix(name, "slow"); slow && strings.Contains(m.Text, seatRelease) {
				note(".yields", held)
				res, err := call("cotal_yield", map[string]any{"turn": held, "status": "done", "note": "did it"})
				switch {
				case err != nil:
					note(".refusals", err.Error())
				case res.IsError:
					note(".refusals", strings.ReplaceAll(resultText(res), "\n", " "))
				default:
					note(".released", strings.ReplaceAll(resultText(res), "\n", " "))
				}
				continue
			} else if slow && strings.Contains(m.Text, seatFence) {
				note(".fences", m.ID)
				continue
			}
			// A turn's message as the model reads it (escaped): its id and what it asks.
			mt := turnRE.FindStringSubmatch(strings.ReplaceAll(m.Text, `\"`, `"`))
			if mt == nil {
				continue
			}
			turn := mt[1]
			note(".handed", turn)
			if strings.HasPrefix(name, "slow") {
				held = turn
				continue // it yields when released
			}
			args := map[string]any{"turn": turn, "status": "done", "note": "did it"}
			if strings.Contains(m.Text, "asks you for a record") {
				bad, err := call("cotal_yield", map[string]any{"turn": turn, "status": "done", "value": map[string]any{"ok": "yes", "n": 3}})
				if err == nil && bad.IsError {
					_ = os.WriteFile(filepath.Join(out, name+".refused"), []byte(resultText(bad)), 0o600)
				}
				args = map[string]any{"status": "done", "value": map[string]any{"ok": true, "n": 3}} // the one turn waiting
			}
			// Noted before the call: a manager killed as it answers may leave a yield
			// that landed unanswered.
			note(".yields", turn)
			res, err := call("cotal_yield", args)
			if err == nil && !res.IsError {
				_ = os.WriteFile(filepath.Join(out, name+"."+turn), []byte(resultText(res)), 0o600)
			}
		}
	}
	return 0
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// runRig is a manager that hosts runs on a real broker, whose persona worker runs in the
// claude harness, which the test launches as runSeat.
type runRig struct {
	*rig
	js  jetstream.JetStream
	out string

	mu   sync.Mutex
	kill func(key string) // BeforeSettle of every hosted drive
}

func newRunRig(t *testing.T) *runRig {
	t.Helper()
	rr := &runRig{out: t.TempDir()}
	rr.rig = newRig(t, func(m *manager.Manager) {
		exe := m.Exe
		m.LookPath = func(name string) (string, error) {
			if name == "claude" {
				return exe, nil
			}
			return "", errors.New("not installed")
		}
		m.Environ = func() []string { return append(os.Environ(), seatEnv+"=1", runSeatEnv+"=1", runSeatOut+"="+rr.out) }
		m.RunConfig = func(c *rundriver.Config) {
			c.BeforeSettle = func(key string) {
				rr.mu.Lock()
				k := rr.kill
				rr.mu.Unlock()
				if k != nil {
					k(key)
				}
			}
		}
	})
	if err := rr.proj.WritePersona(&workspace.Persona{Name: "worker", Agent: "claude", Prompt: "You work."}); err != nil {
		t.Fatal(err)
	}
	var err error
	if rr.js, err = jetstream.New(dial(t, rr.url)); err != nil {
		t.Fatal(err)
	}
	return rr
}

func (rr *runRig) wait(run string) rundriver.Outcome {
	rr.t.Helper()
	ctx, cancel := context.WithTimeout(rr.t.Context(), 2*time.Minute)
	defer cancel()
	out, err := rr.m.WaitRun(ctx, run)
	if err != nil {
		rr.t.Fatalf("run %s: %v", run, err)
	}
	return out
}

// entries are the journal entries of key by state.
func (rr *runRig) entries(run, key string) (pending, settled []runstore.Entry) {
	rr.t.Helper()
	recs, _, err := runstore.Replay(rr.t.Context(), rr.js, space, run)
	if err != nil {
		rr.t.Fatal(err)
	}
	for _, r := range recs {
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

// seatsOf are the seats the run spawned.
func (rr *runRig) seatsOf(run string) []protocol.SeatInfo {
	rr.t.Helper()
	var ps protocol.PsResult
	if err := rr.call(protocol.MgrPs, protocol.NameArgs{}, &ps); err != nil {
		rr.t.Fatal(err)
	}
	var out []protocol.SeatInfo
	for _, s := range ps.Seats {
		if s.Spawner == "local."+rundriver.RunCaller(run) {
			out = append(out, s)
		}
	}
	return out
}

// yields are the turns the seat yielded, one line per yield it made.
func (rr *runRig) yields(seat string) []string {
	rr.t.Helper()
	b, err := os.ReadFile(filepath.Join(rr.out, seat+".yields"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		rr.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

const seatProgramSource = `const w = await spawn("worker");
const t = await turn(w, { name: "work", deadline: "5m" });
const r = await ask(w, { name: "report", schema: { ok: "boolean", n: "number" }, deadline: "5m" });
log(t.status + " " + t.note + " " + r.ok + " " + r.n);`

func (rr *runRig) checkCompleted(run string) {
	rr.t.Helper()
	for _, key := range []string{"/spawn:worker#0", "/turn:work#0", "/ask:report#0"} {
		if _, s := rr.entries(run, key); len(s) != 1 || s[0].Status != "ok" {
			rr.t.Fatalf("%s: settled %+v; want once, ok", key, s)
		}
	}
	_, s := rr.entries(run, "/ask:report#0")
	if string(s[0].Result) != `{"n":3,"ok":true}` {
		rr.t.Fatalf("the ask settled %s", s[0].Result)
	}
	_, s = rr.entries(run, "/turn:work#0")
	var turn map[string]any
	if err := json.Unmarshal(s[0].Result, &turn); err != nil || turn["status"] != "done" || turn["note"] != "did it" {
		rr.t.Fatalf("the turn settled %s", s[0].Result)
	}
	seats := rr.seatsOf(run)
	if len(seats) != 1 {
		rr.t.Fatalf("the run spawned %d seats: %+v", len(seats), seats)
	}
	if y := rr.yields(seats[0].Name); len(y) != 2 {
		rr.t.Fatalf("seat %s yielded %v; want the turn and the ask once each", seats[0].Name, y)
	}
	// The ask's answer is the seat's, filed once under the ask's token.
	_, s = rr.entries(run, "/ask:report#0")
	recs, err := runstore.OpenRecords(rr.t.Context(), rr.js, space)
	if err != nil {
		rr.t.Fatal(err)
	}
	answers, err := recs.Answers(rr.t.Context(), runstore.DefaultEndpoint, s[0].RequestID)
	if err != nil || len(answers) != 1 || answers[0].By != "local."+seats[0].Name {
		rr.t.Fatalf("answers %+v, %v; want one by the seat", answers, err)
	}
	refused, err := os.ReadFile(filepath.Join(rr.out, seats[0].Name+".refused"))
	if err != nil || !strings.Contains(string(refused), `the field "ok" must be a boolean`) {
		rr.t.Fatalf("the non-conforming answer was not refused to the seat: %q %v", refused, err)
	}
}

// A hosted run spawns a seat through the manager, hands it a turn and asks it for a
// typed record; the seat (its real MCP server and an MCP client) ends both with
// cotal_yield, its wrong-typed answer refused and its good one filed as the ask's answer.
func TestHostedRunTurnAndAskThroughCotalYield(t *testing.T) {
	rr := newRunRig(t)
	run, err := rr.m.StartRun(seatProgramSource, "seat.cotal.js")
	if err != nil {
		t.Fatal(err)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %+v", out)
	}
	rr.checkCompleted(run)
}

// Every seat effect is performed once across a driver killed between its pending and its
// settled record (an in-process kill: the hosted drive's context is cancelled at the
// settle, which is left unwritten and the run recorded running), then resumed: one seat,
// one turn yielded, one answer. A resume while the run is driven is refused and appends
// nothing.
func TestHostedSeatEffectsExactlyOnceAcrossAKill(t *testing.T) {
	rr := newRunRig(t)
	for _, key := range []string{"/spawn:worker#0", "/turn:work#0", "/ask:report#0"} {
		t.Run(strings.Trim(key, "/#0"), func(t *testing.T) {
			runID := make(chan string, 1)
			var once sync.Once
			rr.mu.Lock()
			rr.kill = func(k string) {
				if k == key {
					once.Do(func() { rr.m.StopRun(<-runID) })
				}
			}
			rr.mu.Unlock()
			run, err := rr.m.StartRun(seatProgramSource, "")
			if err != nil {
				t.Fatal(err)
			}
			runID <- run
			if out := rr.wait(run); out.State != runstore.StateReleased {
				t.Fatalf("the killed drive ended %+v", out)
			}
			if p, s := rr.entries(run, key); len(p) == 0 || len(s) != 0 {
				t.Fatalf("after the kill %s has %d pending, %d settled", key, len(p), len(s))
			}
			var st runstore.RunStatus
			recs, err := runstore.OpenRecords(t.Context(), rr.js, space)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := recs.Get(t.Context(), runstore.RunStatusKey(runstore.DefaultEndpoint, run), &st); err != nil || st.State != runstore.StateRunning {
				t.Fatalf("status after the kill %+v %v; want running", st, err)
			}
			if err := rr.m.ResumeRun(run); err != nil {
				t.Fatal(err)
			}
			if err := rr.m.ResumeRun(run); !errors.Is(err, manager.ErrRunDriven) {
				t.Fatalf("a second resume while driven: %v", err)
			}
			if out := rr.wait(run); out.State != runstore.StateCompleted {
				t.Fatalf("the resumed run ended %+v", out)
			}
			journal, _, err := runstore.Replay(t.Context(), rr.js, space, run)
			if err != nil {
				t.Fatal(err)
			}
			acts := 0
			for _, r := range journal {
				if r.Activation != nil {
					acts++
				}
			}
			if acts != 2 {
				t.Fatalf("the journal holds %d activations; want the start's and one resume's (the refused resume appends none)", acts)
			}
			rr.checkCompleted(run)
		})
	}
}

// A manager takes back, at its start, every run its endpoint records running: a run
// parked at a checkpoint when its manager stopped is resumed by the next one under the
// next epoch and fencing token, and completes once the checkpoint is answered.
func TestManagerTakesBackRunningRunsAtStart(t *testing.T) {
	rr := newRunRig(t)
	run, err := rr.m.StartRun(`const c = await checkpoint("go", "Go on?", { timeout: "1h" });
log("answered " + c.value);`, "")
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the checkpoint waits", 30*time.Second, func() bool {
		p, _ := rr.entries(run, "/checkpoint:go#0")
		return len(p) >= 2
	})
	rr.stop()
	select {
	case err := <-rr.done:
		if err != nil {
			t.Fatalf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop")
	}
	recs, err := runstore.OpenRecords(t.Context(), rr.js, space)
	if err != nil {
		t.Fatal(err)
	}
	var st runstore.RunStatus
	if _, err := recs.Get(t.Context(), runstore.RunStatusKey(runstore.DefaultEndpoint, run), &st); err != nil || st.State != runstore.StateRunning || st.Epoch != 1 {
		t.Fatalf("status once the manager stopped %+v %v; want running at epoch 1", st, err)
	}
	rr.start()
	meshtest.Until(t, "the new manager holds the run at epoch 2", 30*time.Second, func() bool {
		var st runstore.RunStatus
		_, err := recs.Get(t.Context(), runstore.RunStatusKey(runstore.DefaultEndpoint, run), &st)
		return err == nil && st.Epoch == 2 && st.FencingToken == 2 && st.State == runstore.StateRunning
	})
	p, _ := rr.entries(run, "/checkpoint:go#0")
	token := rundriver.Token(p[len(p)-1])
	id, err := runstore.AnswerID(token, "local.root", "yes", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(t.Context(), runstore.AnswerKey(runstore.DefaultEndpoint, token, id),
		runstore.Answer{V: 1, Token: token, AnswerID: id, Value: json.RawMessage(`"yes"`), By: "local.root", At: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("the taken-back run ended %+v", out)
	}
}

// The manager answers a turn-yield only for the caller's own turn: another agent naming
// the goal is refused and the turn stays pending for its seat.
func TestTurnYieldRefusesAForeignGoal(t *testing.T) {
	rr := newRunRig(t)
	if err := rr.proj.WritePersona(&workspace.Persona{Name: "idle", Agent: "claude", Prompt: "You idle."}); err != nil {
		t.Fatal(err)
	}
	run, err := rr.m.StartRun(`const w = await spawn("idle");
await turn(w, { name: "t", deadline: "1h" });`, "")
	if err != nil {
		t.Fatal(err)
	}
	var goal string
	meshtest.Until(t, "the turn is handed", 60*time.Second, func() bool {
		p, _ := rr.entries(run, "/turn:t#0")
		if len(p) == 2 {
			goal = p[1].RequestID
			return true
		}
		return false
	})
	seat := rr.seatsOf(run)[0].Name
	nc := dial(t, rr.url)
	mallory := &mgrclient.Client{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "mallory"}}
	var me *mgrclient.Error
	if _, err := mallory.TurnYield(t.Context(), mgrclient.TurnYieldArgs{GoalID: goal, Status: "done"}); !errors.As(err, &me) || !strings.Contains(me.Message, "you hold no turn") {
		t.Fatalf("a foreign yield: %v", err)
	}
	if p, err := mallory.TurnPending(t.Context()); err != nil || len(p.Turns) != 0 {
		t.Fatalf("mallory's turns %+v %v; want none", p, err)
	}
	own := &mgrclient.Client{NC: nc, Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: seat}}
	p, err := own.TurnPending(t.Context())
	if err != nil || len(p.Turns) != 1 || p.Turns[0].GoalID != goal {
		t.Fatalf("the seat's turns %+v %v; want its turn still pending", p, err)
	}
	if _, err := own.TurnYield(t.Context(), mgrclient.TurnYieldArgs{GoalID: goal, Status: "handoff", To: "stranger"}); !errors.As(err, &me) || !strings.Contains(me.Message, "hand off only to a seat this run spawned") {
		t.Fatalf("a handoff to a stranger: %v", err)
	}
	rr.m.StopRun(run)
	rr.wait(run)
}

// run-start and run-resume on the reference's ep rails: the manager validates and drives
// the program and answers its id; a resume of a run it drives is a conflict and performs
// nothing, one of no run is not-found, and a program that is no Cotal Lang is refused.
func TestEPRunStartAndResume(t *testing.T) {
	rr := newRunRig(t)
	c := &mgrclient.EPCaller{NC: dial(t, rr.url), Space: space, Caller: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "root"}, UID: "opcaller00000000000000000000"}
	var started struct {
		RunID string `json:"runId"`
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": `await checkpoint("go", "Go?");`, "timeout": "2h"}}, &started); err != nil || !strings.HasPrefix(started.RunID, "run-") {
		t.Fatalf("run-start: %+v %v", started, err)
	}
	var cp []runstore.Entry
	meshtest.Until(t, "the checkpoint waits", 30*time.Second, func() bool {
		cp, _ = rr.entries(started.RunID, "/checkpoint:go#0")
		return len(cp) == 2
	})
	var x struct{ Since, Deadline int64 }
	if err := json.Unmarshal(cp[1].External, &x); err != nil || x.Deadline-x.Since != 2*3_600_000 {
		t.Fatalf("the checkpoint bound %s; want the run's 2h timeout", cp[1].External)
	}
	var me *mgrclient.Error
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-resume", Args: map[string]any{"runId": started.RunID}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPConflict {
		t.Fatalf("run-resume of a driven run: %v", err)
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-resume", Args: map[string]any{"runId": "run-00000000000000000000000000000000"}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPNotFound {
		t.Fatalf("run-resume of no run: %v", err)
	}
	if _, err := c.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": `var x = 1;`}}, nil); !errors.As(err, &me) || me.Code != mgrclient.EPBadRequest || !strings.Contains(me.Message, "L1003") {
		t.Fatalf("run-start of a refused program: %v", err)
	}
	journal, _, err := runstore.Replay(t.Context(), rr.js, space, started.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if a := runstore.LastActivation(journal); a == nil || a.Epoch != 1 {
		t.Fatalf("the refused resume activated: %+v", a)
	}
	rr.m.StopRun(started.RunID)
	rr.wait(started.RunID)
}

// wait(replied(w)) resolves with the seat's turn settled on another branch, and
// wait(down(w)) with the seat's end when the operator stops it.
func TestHostedWaitRepliedAndDown(t *testing.T) {
	rr := newRunRig(t)
	run, err := rr.m.StartRun(`const w = await spawn("worker");
const both = await parallel({ t: () => turn(w, { name: "work", deadline: "5m" }), r: () => wait(replied(w), { name: "seen", timeout: "5m" }) });
log("replied " + both.r.status + " " + both.r.note);
const gone = await wait(down(w), { name: "gone", timeout: "5m" });
log("down " + gone.reason);`, "")
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the run waits for its seat's end", 60*time.Second, func() bool {
		p, _ := rr.entries(run, "/wait:gone#0")
		return len(p) == 2
	})
	if _, s := rr.entries(run, "/parallel#0/b:r/wait:seen#0"); len(s) != 1 || !strings.Contains(string(s[0].Result), `"status":"done"`) {
		t.Fatalf("wait(replied) settled %+v", s)
	}
	seat := rr.seatsOf(run)[0].Name
	if err := rr.call(protocol.MgrStop, protocol.NameArgs{Name: seat, Force: true}, nil); err != nil {
		t.Fatal(err)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %+v", out)
	}
	if _, s := rr.entries(run, "/wait:gone#0"); len(s) != 1 || !strings.Contains(string(s[0].Result), `"reason":"lapsed"`) {
		t.Fatalf("wait(down) settled %+v", s)
	}
}

// A program chooses no program, folder or launch: spawning a persona whose harness is the
// command connector, or asking for a folder or a worktree, is a catchable L4002 and
// nothing is spawned.
func TestRunSpawnChoosesNoProgram(t *testing.T) {
	rr := newRunRig(t)
	if err := rr.proj.WritePersona(&workspace.Persona{Name: "shell", Agent: "command", Prompt: "x"}); err != nil {
		t.Fatal(err)
	}
	run, err := rr.m.StartRun(`try { await spawn("shell"); } catch (e) { log(e.code); }
try { await spawn("worker", { cwd: "/tmp" }); } catch (e) { log(e.code); }
try { await spawn("worker", { worktree: "wt" }); } catch (e) { log(e.code); }
try { await spawn("nosuch"); } catch (e) { log(e.code); }`, "")
	if err != nil {
		t.Fatal(err)
	}
	if out := rr.wait(run); out.State != runstore.StateCompleted {
		t.Fatalf("run ended %+v", out)
	}
	if seats := rr.seatsOf(run); len(seats) != 0 {
		t.Fatalf("the run spawned %+v", seats)
	}
	for _, key := range []string{"/spawn:shell#0", "/spawn:worker#0", "/spawn:worker#1", "/spawn:nosuch#0"} {
		if _, s := rr.entries(run, key); len(s) != 1 || s[0].Status != "failed" || s[0].Error.Code != "L4002" {
			t.Fatalf("%s settled %+v; want failed L4002", key, s)
		}
	}
}
