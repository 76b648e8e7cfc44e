package manager_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/mgrclient"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/runstore"
)

// A seat's yield of a turn this manager knows only from its told record (a manager since
// gone told the seat of it) is refused as withdrawn when the run has ended, its journal
// settled the step meanwhile, or the step moved on to an ask's later attempt: no drive
// will read that yield, so answering it succeeded would tell the seat its work counted. A yield of a turn whose run still goes is taken,
// and a retry of a yield already recorded is answered as before.
func TestYieldOfAToldTurnAfterItsRunMovedOn(t *testing.T) {
	rr := newRunRig(t)
	ctx := t.Context()
	recs, err := runstore.OpenRecords(ctx, rr.js, space)
	if err != nil {
		t.Fatal(err)
	}
	const seat, step = "worker_0000a1", "/turn:work#0"
	me := protocol.Principal{Owner: protocol.OwnerLocal, Actor: seat}
	asSeat := &mgrclient.Client{NC: dial(t, rr.url), Space: space, Caller: me}
	// told files a told record of a fresh goal of run, as the manager that told the seat
	// would have, with its run's status, and a journal whose turn is pending, or settled
	// cancelled when settled is set, or pending again under a later attempt's goal when
	// moved is set.
	told := func(state string, settled, moved bool) (run, goal string) {
		t.Helper()
		run, goal = runstore.NewRunID(), runstore.NewRunID()
		_, ap, err := runstore.Activate(ctx, rr.js, space, run, runstore.Lease{Holder: "gone", FencingToken: 1, Epoch: 1}, true,
			func() int64 { return 1 })
		if err != nil {
			t.Fatal(err)
		}
		e := runstore.Entry{V: 1, Seq: 1, Run: run, Kind: "turn", Name: "work", RequestID: goal, State: "pending", StartedAt: 1}
		if _, err := ap.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		if moved {
			e.External = json.RawMessage(`{"token":"` + goal + `","since":1,"deadline":9,"askAttempt":1}`)
			if _, err := ap.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
			e.External = json.RawMessage(`{"token":"attempt2","since":1,"deadline":9,"askAttempt":2}`)
			if _, err := ap.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if settled {
			end := int64(2)
			e.State, e.Status, e.EndedAt = "settled", "cancelled", &end
			if _, err := ap.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := recs.Create(ctx, runstore.RunStatusKey(runstore.DefaultEndpoint, run),
			runstore.RunStatus{V: 1, State: state, Holder: "gone", Epoch: 1, FencingToken: 1, At: 1}); err != nil {
			t.Fatal(err)
		}
		rec := map[string]any{"v": 1, "goalId": goal, "run": run, "step": step, "seat": me.String(), "msgId": "m",
			"deadlineAt": time.Now().Add(time.Hour).UnixMilli(), "at": 1}
		if err := recs.Create(ctx, "told."+runstore.DefaultEndpoint+"."+goal, rec); err != nil {
			t.Fatal(err)
		}
		return run, goal
	}
	yield := func(goal string) (mgrclient.TurnYieldResult, error) {
		return asSeat.TurnYield(ctx, mgrclient.TurnYieldArgs{GoalID: goal, Status: "done", Note: "did it"})
	}
	for _, c := range []struct {
		name, state    string
		settled, moved bool
		want           string
	}{
		{"run completed", runstore.StateCompleted, false, false, "has completed"},
		{"run failed", runstore.StateFailed, false, false, "has failed"},
		{"step settled", runstore.StateRunning, true, false, "settled its step " + step + " cancelled"},
		{"later attempt", runstore.StateRunning, false, true, "moved its step " + step + " on to a later attempt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, goal := told(c.state, c.settled, c.moved)
			var me *mgrclient.Error
			if _, err := yield(goal); !errors.As(err, &me) || !strings.Contains(me.Message, "was withdrawn: run "+run+" "+c.want) {
				t.Fatalf("the yield: %v; want it refused as withdrawn (%s)", err, c.want)
			}
			var y map[string]any
			if _, err := recs.Get(ctx, "yield."+runstore.DefaultEndpoint+"."+goal, &y); !errors.Is(err, runstore.ErrNoRecord) {
				t.Fatalf("a refused yield left a record %v (%v)", y, err)
			}
		})
	}
	t.Run("not a goal id", func(t *testing.T) {
		for _, goal := range []string{"", "a.b", "*", ">", "x y", strings.Repeat("g", 65)} {
			var me *mgrclient.Error
			if _, err := yield(goal); !errors.As(err, &me) || !strings.Contains(me.Message, "goalId") {
				t.Errorf("a yield of goal %q: %v; want it refused as no goal id", goal, err)
			}
		}
	})
	t.Run("run going", func(t *testing.T) {
		_, goal := told(runstore.StateRunning, false, false)
		for range 2 { // the second is a retry of a yield whose answer was lost
			if res, err := yield(goal); err != nil || res.State != "succeeded" {
				t.Fatalf("the yield: %+v %v; want it taken", res, err)
			}
		}
	})
}
