package rundriver

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/lang"
	"github.com/cotal-ai/cotal/runstore"
)

// stuckSeats is a seat host whose seats never yield: a turn ends only when it is
// withdrawn (Cancel) or its context ends, and the host times no deadline of its own.
type stuckSeats struct {
	mu     sync.Mutex
	goals  map[string]chan struct{}
	handed map[string]int
}

func newStuckSeats() *stuckSeats {
	return &stuckSeats{goals: map[string]chan struct{}{}, handed: map[string]int{}}
}

func (s *stuckSeats) goal(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.goals[id]
	if !ok {
		g = make(chan struct{})
		s.goals[id] = g
	}
	return g
}

func (s *stuckSeats) Spawn(_ context.Context, r SpawnRequest) (Handle, error) {
	return Handle{Agent: r.Persona + "-1", Persona: r.Persona}, nil
}

func (s *stuckSeats) Turn(ctx context.Context, r TurnRequest) (TurnResult, error) {
	s.mu.Lock()
	s.handed[r.GoalID]++
	s.mu.Unlock()
	select {
	case <-s.goal(r.GoalID):
		return TurnResult{}, &lang.EffectError{Code: "L4002", Kind: "cancelled", Message: "turn " + r.Step + " was withdrawn"}
	case <-ctx.Done():
		return TurnResult{}, ctx.Err()
	}
}

func (s *stuckSeats) Cancel(_, goalID string) {
	g := s.goal(goalID)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
}

func (s *stuckSeats) Down(ctx context.Context, _, _ string) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (s *stuckSeats) withdrawn(goalID string) bool {
	select {
	case <-s.goal(goalID):
		return true
	default:
		return false
	}
}

// A turn's and an ask's deadline are timed by the driver's clock too: with no timer
// writer to fire them and a seat host that never ends the turn, the driver's clock
// passing the deadline withdraws the turn and settles the step L4003, once.
func TestTurnAndAskDeadlineOnTheDriversClock(t *testing.T) {
	for _, c := range []struct{ name, effect, key string }{
		{"turn", `await turn(w, { name: "build", deadline: "2m" })`, "/turn:build#0"},
		{"ask", `await ask(w, { name: "q", schema: { ok: "boolean" }, deadline: "2m", attempts: 2 })`, "/ask:q#0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			seats := newStuckSeats()
			cfg := f.cfg()
			cfg.Seats = seats
			prog, run, err := Prepare(`const w = await spawn("dev");
try { ` + c.effect + `; log("ended"); } catch (e) { log(e.code); }`)
			if err != nil {
				t.Fatal(err)
			}
			ended := make(chan Outcome, 1)
			go func() {
				out, err := Start(t.Context(), cfg, prog, run, "")
				if err != nil {
					t.Error(err)
				}
				ended <- out
			}()
			var x seatExternal
			meshtest.Until(t, "the step is bound and handed", 10*time.Second, func() bool {
				p, _ := f.entries(run, c.key)
				if len(p) != 2 {
					return false
				}
				x, _ = readSeatExternal(p[1])
				seats.mu.Lock()
				defer seats.mu.Unlock()
				return seats.handed[x.Token] > 0
			})
			f.clock.Store(x.Deadline)
			var out Outcome
			select {
			case out = <-ended:
			case <-time.After(20 * time.Second):
				t.Fatal("the deadline did not end the step")
			}
			if out.State != runstore.StateCompleted || len(f.logs) != 1 || f.logs[0] != "L4003" {
				t.Fatalf("run %+v, logs %q; want completed with L4003 caught", out, f.logs)
			}
			_, s := f.entries(run, c.key)
			if len(s) != 1 || s[0].Status != "failed" || s[0].Error == nil || s[0].Error.Code != "L4003" {
				b, _ := json.Marshal(s)
				t.Fatalf("%s settled %s; want once, failed L4003", c.key, b)
			}
			if !seats.withdrawn(x.Token) {
				t.Fatalf("the turn %s was not withdrawn at its deadline", x.Token)
			}
		})
	}
}
