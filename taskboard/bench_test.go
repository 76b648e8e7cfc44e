package taskboard_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/taskboard"
)

// BenchmarkTaskClaim measures tasks claimed per second when 20 agents (each on its own
// minted agent credential and connection) race for every task, against the baseline of
// one agent claiming tasks alone, measured in the same run; it reports both rates and
// their ratio (contended / alone). Each task is created beforehand, outside the timing.
func BenchmarkTaskClaim(b *testing.B) {
	ms := newMesh(b)
	agents := make([]*taskboard.Board, 20)
	for i := range agents {
		agents[i] = ms.board(b, fmt.Sprintf("a%02d", i))
	}
	lead := ms.board(b, "lead")
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			t, err := lead.Create(b.Context(), taskboard.TaskRow{Title: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			out[i] = t.ID
		}
		return out
	}
	claim := func(claimers []*taskboard.Board, id string) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for _, c := range claimers {
			wg.Go(func() {
				_, err := c.Claim(b.Context(), id)
				switch {
				case err == nil:
					mu.Lock()
					winners++
					mu.Unlock()
				case !errors.Is(err, taskboard.ErrHeld):
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if winners != 1 {
			b.Fatalf("task %s: %d winners", id, winners)
		}
	}
	const perRound = 10
	var alone, raced time.Duration
	for b.Loop() {
		b.StopTimer()
		a, r := ids(perRound), ids(perRound)
		b.StartTimer()
		start := time.Now()
		for _, id := range a {
			claim(agents[:1], id)
		}
		alone += time.Since(start)
		start = time.Now()
		for _, id := range r {
			claim(agents, id)
		}
		raced += time.Since(start)
	}
	n := float64(b.N * perRound)
	b.ReportMetric(n/alone.Seconds(), "claims/s-alone")
	b.ReportMetric(n/raced.Seconds(), "claims/s-20agents")
	b.ReportMetric(alone.Seconds()/raced.Seconds(), "ratio-20/alone")
}
