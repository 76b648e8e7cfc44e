package manager_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
	"github.com/cotal-ai/cotal/workspace"
)

// tellProgramSource hands a slow seat (runSeat) one turn.
const tellProgramSource = `const w = await spawn("slow");
const t = await turn(w, { name: "work", deadline: "10m" });
log(t.status + " " + t.note);`

// A seat is told of a pending turn once across a SIGKILL of the manager hosting its run:
// the next manager takes the run back and hands the turn again under the same goal id,
// and does not tell the seat again when the first manager told it (and recorded that,
// or was killed after the notice was stored and before it recorded it); when the first
// manager was killed before it told the seat, the next one tells it. Each way the seat
// reads one notice, yields once, and the run completes.
func TestTurnToldOnceAcrossManagerSIGKILL(t *testing.T) {
	t.Run("told before the kill", func(t *testing.T) { tellAcrossKill(t, "") })
	t.Run("killed before telling", func(t *testing.T) { tellAcrossKill(t, "before") })
	t.Run("killed after telling before recording", func(t *testing.T) { tellAcrossKill(t, "sent") })
	// The seat yields the turn it was told of after the kill, before the next manager's
	// drive hands it again (held at the turn): the yield is taken, from the told record,
	// and the drive answers the step from it.
	t.Run("yielded before handed again", func(t *testing.T) { tellAcrossKill(t, "gap") })
}

// tellAcrossKill runs tellProgramSource on a manager process that is SIGKILLed with the
// turn pending: once the seat read its notice (at "" and "gap"), or held where the
// manager's TurnNotice hook is called (at "before" or "sent"). At "gap" the next manager
// holds the turn (gatedSeats) until the seat's yield landed.
func tellAcrossKill(t *testing.T, at string) {
	k := newKillRig(t)
	proj, err := workspace.Open(k.root)
	if err != nil {
		t.Fatal(err)
	}
	if err := proj.WritePersona(&workspace.Persona{Name: "slow", Agent: "claude", Prompt: "You work slowly."}); err != nil {
		t.Fatal(err)
	}
	if at == "before" || at == "sent" {
		k.notice = at
	}
	k.startHost("")
	var started struct {
		RunID string `json:"runId"`
	}
	if _, err := k.ep.Call(t.Context(), mgrclient.EPCall{Command: "run-start", Args: map[string]any{"source": tellProgramSource}}, &started); err != nil {
		t.Fatalf("run-start: %v", err)
	}
	run := started.RunID
	var seat string
	meshtest.Until(t, "the run's seat starts", killTimeout, func() bool {
		m, _ := filepath.Glob(filepath.Join(k.out, "slow_*.starts"))
		if len(m) == 1 {
			seat = strings.TrimSuffix(filepath.Base(m[0]), ".starts")
		}
		return seat != ""
	})
	if k.notice != "" {
		meshtest.Until(t, "the manager holds at its turn notice ("+at+")", killTimeout, func() bool {
			_, err := os.Stat(filepath.Join(k.dir, "mark"))
			return err == nil
		})
	}
	if at != "before" {
		meshtest.Until(t, "the seat reads the turn's notice", killTimeout, func() bool {
			return len(k.lines(seat+".handed")) == 1
		})
	}
	k.kill()
	k.notice = ""
	if p, s := entriesOf(k.journal(run), "/turn:work#0"); len(p) == 0 || len(s) != 0 {
		t.Fatalf("after the kill the turn has %d pending, %d settled records; want pending only", len(p), len(s))
	}

	gate := filepath.Join(k.dir, "gate")
	if at == "gap" {
		if err := os.Mkdir(gate, 0o700); err != nil {
			t.Fatal(err)
		}
		k.gate = gate
	}
	k.startHost("")
	meshtest.Until(t, "the new manager holds the run at epoch 2", killTimeout, func() bool {
		return k.status(run).Epoch == 2
	})
	tester, err := client.Connect(t.Context(), k.url, client.Config{Space: space, Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tester.Close() })
	to := protocol.Principal{Owner: protocol.OwnerLocal, Actor: seat}
	// release has the seat yield the turn it read and waits until its yield is answered.
	release := func() {
		t.Helper()
		if _, err := tester.DM(t.Context(), to, client.Text(seatRelease)); err != nil {
			t.Fatal(err)
		}
		meshtest.Until(t, "the seat's yield is answered", killTimeout, func() bool {
			return len(k.lines(seat+".released"))+len(k.lines(seat+".refusals")) > 0
		})
		if r := k.lines(seat + ".refusals"); len(r) > 0 {
			t.Fatalf("the seat's yield was refused: %v", r)
		}
	}
	goal := strings.TrimSpace(strings.Join(k.lines(seat+".handed"), ""))
	if at == "gap" {
		meshtest.Until(t, "the new manager's drive reaches the turn", killTimeout, func() bool {
			_, err := os.Stat(filepath.Join(gate, "reached"))
			return err == nil
		})
		release()
		if err := os.Mkdir(filepath.Join(gate, "open"), 0o700); err != nil {
			t.Fatal(err)
		}
	} else {
		nc := dial(t, k.url)
		asSeat := &mgrclient.Client{NC: nc, Space: space, Caller: to}
		meshtest.Until(t, "the new manager hands the turn again", killTimeout, func() bool {
			res, err := asSeat.TurnPending(t.Context())
			if err != nil || len(res.Turns) != 1 {
				return false
			}
			goal = res.Turns[0].GoalID
			return true
		})
		if at == "before" {
			meshtest.Until(t, "the new manager tells the seat", killTimeout, func() bool {
				return len(k.lines(seat+".handed")) > 0
			})
		}
		release()
	}

	// Released, the seat yields the turn and the run completes. The notice a manager
	// sends is stored before its turn can end, so the fence, sent after, is read after
	// any notice: once the seat reads the fence, it has read every notice it was sent.
	meshtest.Until(t, "the run completes", killTimeout, func() bool {
		return k.status(run).State == runstore.StateCompleted
	})
	if _, err := tester.DM(t.Context(), to, client.Text(seatFence)); err != nil {
		t.Fatal(err)
	}
	meshtest.Until(t, "the seat reads the fence", killTimeout, func() bool {
		return len(k.lines(seat+".fences")) == 1
	})

	if handed := k.lines(seat + ".handed"); len(handed) != 1 || handed[0] != goal {
		t.Fatalf("the seat read the turn's notice %d times %v; want once, of goal %s", len(handed), handed, goal)
	}
	if y := k.lines(seat + ".released"); len(y) != 1 {
		t.Fatalf("the seat's yields that landed: %v; want one", y)
	}
	_, s := entriesOf(k.journal(run), "/turn:work#0")
	if len(s) != 1 || !strings.Contains(string(s[0].Result), `"note":"did it"`) {
		t.Fatalf("the turn settled %+v; want once, as the seat yielded", s)
	}
}
