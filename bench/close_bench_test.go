package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
)

// closeProfile names a directory where BenchmarkClose200 writes a CPU and a block profile
// of its close phase alone (setup excluded): close-cpu.pprof and close-block.pprof.
var closeProfile = flag.String("closeprofile", "", "directory for CPU and block profiles of BenchmarkClose200's close phase")

const (
	closeMembers = 200
	closePosts   = 20 // posts each round, read by every member before they close
	closeJoins   = 4  // members connecting and joining at once while a round is set up
)

// closeMember is one member of the durable channel general: its credential and, during a
// round, its endpoint and the application reading it.
type closeMember struct {
	spec  trust.UserSpec
	creds trust.Creds
	ep    *client.Endpoint
	shown int // posts of the round the application took
	mu    sync.Mutex
	quit  chan struct{}
	done  chan struct{}
}

// open connects the member as the next session of its incarnation, joins general and
// starts its application, which takes and acks every message until quit closes.
func (cm *closeMember) open(ctx context.Context, url string) error {
	ep, err := client.Connect(ctx, url, client.Config{Space: space, Name: cm.spec.Principal.Actor, LifecycleUID: cm.spec.LifecycleUID,
		Heartbeat: time.Hour, InboxSize: 4096}, nats.UserJWTAndSeed(cm.creds.JWT, cm.creds.Seed), nats.CustomInboxPrefix(cm.creds.InboxPrefix))
	if err != nil {
		return err
	}
	if err := ep.Join(ctx, "general"); err != nil {
		_ = ep.Close()
		return err
	}
	if ok, why, _ := ep.Backstop("general"); !ok {
		_ = ep.Close()
		return fmt.Errorf("%s: %s", cm.spec.Principal, why)
	}
	cm.ep, cm.shown = ep, 0
	cm.quit, cm.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cm.done)
		for {
			select {
			case in := <-ep.Messages():
				if in.Durable {
					_ = in.Ack()
				}
				cm.mu.Lock()
				cm.shown++
				cm.mu.Unlock()
			case <-cm.quit:
				return
			}
		}
	}()
	return nil
}

func (cm *closeMember) taken() int {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return cm.shown
}

// BenchmarkClose200: 200 members of the durable channel general, each on its own
// authenticated connection to a real embedded broker with the delivery daemon serving,
// read a round of posts and then all close at once. Each round reports the p50 and p99 of
// one Close and the time until the last one returned, against two baselines measured in
// the same run: one member closing alone (after the same round), and 200 plain nats.Conn
// closing at once. Each round reopens the members as the next session of the same
// incarnations. -closeprofile DIR writes CPU and block profiles of the close phases.
func BenchmarkClose200(b *testing.B) {
	m := newDurableMesh(b)
	members := make([]*closeMember, closeMembers)
	for i := range members {
		spec := m.agent(b, "member"+strconv.Itoa(i))
		members[i] = &closeMember{spec: spec, creds: m.mint(b, spec)}
	}
	alice := m.endpoint(b, m.agent(b, "alice"))
	if *closeProfile != "" {
		runtime.SetBlockProfileRate(int(time.Millisecond))
		defer runtime.SetBlockProfileRate(0)
	}
	// The CPU profile covers the first round's 200 closes; the block profile all of them.
	var cpu *os.File
	profiled := *closeProfile == ""
	startProfile := func() {
		if profiled {
			return
		}
		f, err := os.Create(filepath.Join(*closeProfile, "close-cpu.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		cpu = f
	}
	stopProfile := func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			_ = cpu.Close()
			cpu, profiled = nil, true
		}
	}
	if *closeProfile != "" {
		defer func() {
			f, err := os.Create(filepath.Join(*closeProfile, "close-block.pprof"))
			if err == nil {
				_ = pprof.Lookup("block").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}

	// round opens the members, posts closePosts posts to general and waits until every
	// member's application took them all, then stops the applications (what is left in
	// Messages() is unread and handed back at Close).
	round := func(b *testing.B) {
		b.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(members))
		sem := make(chan struct{}, closeJoins)
		for _, cm := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := cm.open(b.Context(), m.url); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for range closePosts {
			if _, err := alice.Post(b.Context(), "general", client.Text(text)); err != nil {
				b.Fatal(err)
			}
		}
		waitFor(b, func() bool {
			for _, cm := range members {
				if cm.taken() < closePosts {
					return false
				}
			}
			return true
		}, time.Now(), "close round")
		for _, cm := range members {
			close(cm.quit)
			<-cm.done
		}
	}

	// closeAll closes eps at once and returns each Close's duration, sorted, and the time
	// until the last returned.
	closeAll := func(b *testing.B, closers []func() error) ([]time.Duration, time.Duration) {
		b.Helper()
		took := make([]time.Duration, len(closers))
		var ready, wg sync.WaitGroup
		release := make(chan struct{})
		errs := make(chan error, len(closers))
		for i, c := range closers {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-release
				t0 := time.Now()
				if err := c(); err != nil {
					errs <- err
				}
				took[i] = time.Since(t0)
			}()
		}
		ready.Wait()
		start := time.Now()
		close(release)
		wg.Wait()
		total := time.Since(start)
		close(errs)
		for err := range errs {
			b.Errorf("close: %v", err)
		}
		slices.Sort(took)
		return took, total
	}
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(float64(len(d))*p))] }

	var p50s, p99s, totals, alones, conns []time.Duration
	for b.Loop() {
		// Baseline: 200 plain connections of the same credentials closing at once.
		ncs := make([]func() error, len(members))
		for i, cm := range members {
			nc, err := nats.Connect(m.url, nats.UserJWTAndSeed(cm.creds.JWT, cm.creds.Seed), nats.CustomInboxPrefix(cm.creds.InboxPrefix))
			if err != nil {
				b.Fatal(err)
			}
			ncs[i] = func() error { nc.Close(); return nil }
		}
		took, _ := closeAll(b, ncs)
		conns = append(conns, pct(took, 0.99))

		// Baseline: one member closing alone after a round.
		round(b)
		took, _ = closeAll(b, []func() error{members[0].ep.Close})
		alones = append(alones, took[0])
		rest := make([]func() error, 0, len(members)-1)
		for _, cm := range members[1:] {
			rest = append(rest, cm.ep.Close)
		}
		closeAll(b, rest)

		// 200 members closing at once after a round.
		round(b)
		closers := make([]func() error, len(members))
		for i, cm := range members {
			closers[i] = cm.ep.Close
		}
		startProfile()
		took, total := closeAll(b, closers)
		stopProfile()
		p50s, p99s, totals = append(p50s, pct(took, 0.5)), append(p99s, pct(took, 0.99)), append(totals, total)
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(med(p50s), "p50-ms")
	b.ReportMetric(med(p99s), "p99-ms")
	b.ReportMetric(med(totals), "total-ms")
	b.ReportMetric(med(alones), "alone-ms")
	b.ReportMetric(med(conns), "conn-p99-ms")
	b.ReportMetric(med(p99s)/med(alones), "p99/alone")
	b.ReportMetric(med(p99s)/med(conns), "p99/conn")
}
