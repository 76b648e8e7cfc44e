package bench

import (
	"context"
	"errors"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/agentmcp"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/trust"
)

// closeProfile names a directory where BenchmarkClose200 writes a CPU and a block profile
// of its close phase alone (setup excluded): close-cpu.pprof and close-block.pprof.
var closeProfile = flag.String("closeprofile", "", "directory for CPU and block profiles of BenchmarkClose200's close phase")

// closeMembers is how many members BenchmarkClose200 closes at once (200 unless a smaller
// run is wanted while looking into one).
var closeMembers = flag.Int("closemembers", 200, "members BenchmarkClose200 closes at once")

const (
	closePosts = 20 // posts each round, read by every member before they close
	closeJoins = 4  // members connecting and joining at once while a round is set up
)

// closeMember is one member of the durable channel general: its credential and, during a
// round, the session that reads it and how that session is closed.
type closeMember struct {
	spec  trust.UserSpec
	creds trust.Creds
	ep    *client.Endpoint
	mu    sync.Mutex
	shown int // posts of the round the session took
	stop  func()
	close func() error // closes the session as its kind does; returns once it has
}

func (cm *closeMember) add(n int) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.shown += n
}

func (cm *closeMember) taken() int {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return cm.shown
}

// connect connects the member as the next session of its incarnation and joins general.
func (cm *closeMember) connect(ctx context.Context, url string) (*client.Endpoint, error) {
	ep, err := client.Connect(ctx, url, client.Config{Space: space, Name: cm.spec.Principal.Actor, LifecycleUID: cm.spec.LifecycleUID,
		Heartbeat: time.Hour, InboxSize: 4096}, nats.UserJWTAndSeed(cm.creds.JWT, cm.creds.Seed), nats.CustomInboxPrefix(cm.creds.InboxPrefix))
	if err != nil {
		return nil, err
	}
	if err := ep.Join(ctx, "general"); err != nil {
		_ = ep.Close()
		return nil, err
	}
	if ok, why, _ := ep.Backstop("general"); !ok {
		_ = ep.Close()
		return nil, fmt.Errorf("%s: %s", cm.spec.Principal, why)
	}
	return ep, nil
}

// closeMark is in every post of a round.
const closeMark = "close-round-post"

// openEndpoint opens the member as an application on the client package: it takes and
// acks every message until the round ends; close is Endpoint.Close.
func (cm *closeMember) openEndpoint(ctx context.Context, url string) error {
	ep, err := cm.connect(ctx, url)
	if err != nil {
		return err
	}
	cm.ep, cm.shown = ep, 0
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case in := <-ep.Messages():
				if in.Durable {
					_ = in.Ack()
				}
				cm.add(1)
			case <-quit:
				return
			}
		}
	}()
	cm.stop = func() { close(quit); <-done }
	cm.close = ep.Close
	return nil
}

// openMCP opens the member as `cotal mcp` runs it: an agentmcp server on the endpoint,
// its MCP client in the same process. The model reads nothing: the round's posts wait in
// the server's inbox unread (each durable copy held, not acked). close ends the MCP
// session as a client closing stdin does, waits for the server to hand the unread copies
// back, then closes the endpoint, as the command does.
func (cm *closeMember) openMCP(ctx context.Context, url string) error {
	ep, err := cm.connect(ctx, url)
	if err != nil {
		return err
	}
	cm.ep, cm.shown = ep, 0
	srv := &agentmcp.Server{Endpoint: ep, Version: "bench"}
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(context.WithoutCancel(ctx), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		_ = ep.Close()
		return fmt.Errorf("mcp client: %w", err)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: agentmcp.InboxURI})
			if err != nil || len(res.Contents) == 0 {
				continue
			}
			var n int
			if _, err := fmt.Sscanf(res.Contents[0].Text, "%d messages waiting", &n); err == nil {
				cm.mu.Lock()
				cm.shown = n
				cm.mu.Unlock()
			}
		}
	}()
	cm.stop = func() { close(quit); <-done }
	cm.close = func() error {
		_ = cs.Close()
		if err := <-served; err != nil {
			return err
		}
		return ep.Close()
	}
	return nil
}

// BenchmarkClose200: 200 members of the durable channel general, each on its own
// authenticated connection to a real embedded broker with the delivery daemon serving,
// read a round of posts and then all close at once. Each round reports the p50 and p99 of
// one close and the time until the last one returned, against a baseline measured in the
// same round: 200 plain nats.Conn of the same credentials closing at once (p99/conn), and
// one member closing alone after a round (p99/alone). The sessions are endpoint
// (client.Endpoint.Close, which is what `cotal join` does at its end, plus saving its
// history cursor file) and mcp (`cotal mcp`: the MCP session ends with 20 unread copies in
// the server's inbox, handed back, then the endpoint closes). Each round reopens the members as the next session of the same
// incarnations. -closeprofile DIR writes CPU and block profiles of
// the first endpoint round's closes.
func BenchmarkClose200(b *testing.B) {
	m := newDurableMesh(b)
	members := make([]*closeMember, *closeMembers)
	for i := range members {
		spec := m.agent(b, "member"+strconv.Itoa(i))
		raw, err := m.acct.Mint(spec)
		if err != nil {
			b.Fatal(err)
		}
		c, err := trust.ReadCreds(raw)
		if err != nil {
			b.Fatal(err)
		}
		members[i] = &closeMember{spec: spec, creds: c}
	}
	alice := m.endpoint(b, m.agent(b, "alice"))
	if *closeProfile != "" {
		runtime.SetBlockProfileRate(int(time.Millisecond))
		defer runtime.SetBlockProfileRate(0)
		defer func() {
			f, err := os.Create(filepath.Join(*closeProfile, "close-block.pprof"))
			if err == nil {
				_ = pprof.Lookup("block").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	profiled := *closeProfile == ""
	profile := func(f func()) {
		if profiled {
			f()
			return
		}
		profiled = true
		out, err := os.Create(filepath.Join(*closeProfile, "close-cpu.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = out.Close() }()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		f()
		pprof.StopCPUProfile()
	}

	// round opens the members as kind, posts closePosts posts to general and waits until
	// every member's session took them all, then stops the sessions' readers.
	round := func(b *testing.B, kind string) {
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
				open := cm.openEndpoint
				if kind == "mcp" {
					open = cm.openMCP
				}
				if err := open(b.Context(), m.url); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for i := range closePosts {
			if _, err := alice.Post(b.Context(), "general", client.Text(closeMark+" "+strconv.Itoa(i))); err != nil {
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
			cm.stop()
		}
	}

	// closeAll runs closers at once and returns each one's duration, sorted, and the
	// time until the last returned.
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
			if !errors.Is(err, context.Canceled) {
				b.Errorf("close: %v", err)
			}
		}
		slices.Sort(took)
		return took, total
	}
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(float64(len(d))*p))] }
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	closers := func(list []*closeMember) []func() error {
		out := make([]func() error, len(list))
		for i, cm := range list {
			out[i] = cm.close
		}
		return out
	}

	for _, kind := range []string{"endpoint", "mcp"} {
		b.Run(kind, func(b *testing.B) {
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

				{
					// Baseline: one member closing alone after a round.
					round(b, kind)
					took, _ = closeAll(b, closers(members[:1]))
					alones = append(alones, took[0])
					closeAll(b, closers(members[1:]))
				}

				round(b, kind)
				var total time.Duration
				run := func() { took, total = closeAll(b, closers(members)) }
				if kind == "endpoint" {
					profile(run)
				} else {
					run()
				}
				p50s, p99s, totals = append(p50s, pct(took, 0.5)), append(p99s, pct(took, 0.99)), append(totals, total)
			}
			b.ReportMetric(med(p50s), "p50-ms")
			b.ReportMetric(med(p99s), "p99-ms")
			b.ReportMetric(med(totals), "total-ms")
			b.ReportMetric(med(conns), "conn-p99-ms")
			b.ReportMetric(med(p99s)/med(conns), "p99/conn")
			if len(alones) > 0 {
				b.ReportMetric(med(alones), "alone-ms")
				b.ReportMetric(med(p99s)/med(alones), "p99/alone")
			}
		})
	}
}
