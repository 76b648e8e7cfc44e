package manager

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cputime"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
)

func presenceManager() *Manager {
	return &Manager{log: slog.New(slog.DiscardHandler), presence: map[string]client.Peer{}, presCh: make(chan struct{})}
}

func change(actor, activity string, online bool) client.PeerChange {
	return client.PeerChange{Peer: client.Peer{Online: online, Presence: protocol.Presence{
		Card: protocol.AgentCard{ID: "local." + actor, Name: actor}, Status: protocol.StatusIdle, Activity: activity}}}
}

// waiters starts n goroutines that wait on presence as a starting seat does (watchSettle)
// and counts their wake-ups, until ctx ends.
func waiters(ctx context.Context, m *Manager, n int, wakeups *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, changed := m.online("seat_" + strconv.Itoa(i))
				select {
				case <-changed:
					wakeups.Add(1)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return &wg
}

// TestPresenceSpamIsCoalesced: a peer writing its presence 10 000 times wakes the seats
// waiting on presence at most once per presenceEvery (not once per write), and the roster
// keeps each peer's latest presence.
func TestPresenceSpamIsCoalesced(t *testing.T) {
	m := presenceManager()
	ch := make(chan client.PeerChange)
	watched := make(chan struct{})
	go func() { defer close(watched); m.watchPresence(ch) }()
	ctx, cancel := context.WithCancel(t.Context())
	var wakeups atomic.Int64
	wg := waiters(ctx, m, 8, &wakeups)

	began := time.Now()
	for i := range 10000 {
		ch <- change("spammer", "step "+strconv.Itoa(i), true)
	}
	ch <- change("bob", "", true)
	meshtest.Until(t, "bob online", 10*time.Second, func() bool { on, _ := m.online("bob"); return on })
	elapsed := time.Since(began)
	cancel()
	wg.Wait()
	close(ch)
	<-watched

	m.mu.Lock()
	last := m.presence["spammer"].Activity
	m.mu.Unlock()
	if last != "step 9999" {
		t.Fatalf("the roster keeps activity %q, want the latest, step 9999", last)
	}
	// Each waiter wakes at most once per application: one at once, then one per
	// presenceEvery the burst lasted.
	limit := 8 * (2 + int64(elapsed/presenceEvery))
	if n := wakeups.Load(); n > limit {
		t.Fatalf("10 000 presence writes in %s woke the waiting seats %d times, want at most %d", elapsed, n, limit)
	}
}

// perChange is the manager's presence watch as it was: every change taken under the lock
// and every waiter woken. It is the baseline of BenchmarkPresenceSpam.
func perChange(m *Manager, ch <-chan client.PeerChange) {
	for c := range ch {
		p, err := protocol.ParsePrincipal(c.Card.ID)
		if err != nil || p.Owner != protocol.OwnerLocal {
			continue
		}
		m.mu.Lock()
		m.presence[p.Actor] = c.Peer
		close(m.presCh)
		m.presCh = make(chan struct{})
		m.mu.Unlock()
	}
}

func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// BenchmarkPresenceSpam: the CPU time of the process (user and system) per 10 000
// presence writes of one peer, with 8 seats waiting on presence, for the per-change
// baseline and the coalescing watch, in the same run. Compare cpu-ms/10k-writes.
func BenchmarkPresenceSpam(b *testing.B) {
	for _, c := range []struct {
		name  string
		watch func(*Manager, <-chan client.PeerChange)
	}{{"per-change", perChange}, {"coalesced", (*Manager).watchPresence}} {
		b.Run(c.name, func(b *testing.B) {
			m := presenceManager()
			ch := make(chan client.PeerChange, 64) // as client.WatchPresence's
			watched := make(chan struct{})
			go func() { defer close(watched); c.watch(m, ch) }()
			ctx, cancel := context.WithCancel(context.Background())
			var wakeups atomic.Int64
			wg := waiters(ctx, m, 8, &wakeups)
			changes := make([]client.PeerChange, 10000)
			for i := range changes {
				changes[i] = change("spammer", "step "+strconv.Itoa(i), true)
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				for _, c := range changes {
					ch <- c
				}
			}
			b.StopTimer()
			close(ch)
			<-watched
			cpu := cpuTime() - cpu0
			cancel()
			wg.Wait()
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/10k-writes")
			b.ReportMetric(float64(wakeups.Load())/float64(b.N), "wakeups/10k-writes")
		})
	}
}
