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
	"strings"
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
	// watch, when set, starts counting what the session took once the round's posts are
	// sent, until it took want (the mcp kind polls for it; nothing polls while members
	// join, which would starve the daemon on a small machine).
	watch func(want int)
	peek  func() string // what the mcp session holds, for a round that came up short
	close func() error  // closes the session as its kind does; returns once it has
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

// dial connects the member as the next session of its incarnation, not yet joined.
func (cm *closeMember) dial(ctx context.Context, url string) (*client.Endpoint, error) {
	return client.Connect(ctx, url, client.Config{Space: space, Name: cm.spec.Principal.Actor, LifecycleUID: cm.spec.LifecycleUID,
		Heartbeat: time.Hour, InboxSize: 4096}, nats.UserJWTAndSeed(cm.creds.JWT, cm.creds.Seed), nats.CustomInboxPrefix(cm.creds.InboxPrefix))
}

// backstopped checks that ep's durable copies of general are bound (the member loses
// nothing posted while it is away); it closes ep when they are not.
func (cm *closeMember) backstopped(ep *client.Endpoint) error {
	if ok, why, _ := ep.Backstop("general"); !ok {
		_ = ep.Close()
		return fmt.Errorf("%s: %s", cm.spec.Principal, why)
	}
	return nil
}

// connect connects the member as the next session of its incarnation and joins general.
func (cm *closeMember) connect(ctx context.Context, url string) (*client.Endpoint, error) {
	ep, err := cm.dial(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := ep.Join(ctx, "general"); err != nil {
		_ = ep.Close()
		return nil, err
	}
	if err := cm.backstopped(ep); err != nil {
		return nil, err
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
	cm.ep, cm.shown, cm.watch = ep, 0, nil
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
// back, then closes the endpoint, as the command does. The server joins the endpoint
// (Server.Endpoint is connected and not yet joined), as `cotal mcp` has it join.
func (cm *closeMember) openMCP(ctx context.Context, url string) error {
	ep, err := cm.dial(ctx, url)
	if err != nil {
		return err
	}
	cm.ep, cm.shown = ep, 0
	ready := make(chan struct{})
	srv := &agentmcp.Server{Endpoint: ep, Channels: []string{"general"}, Version: "bench", Ready: func() { close(ready) }}
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	go func() { served <- srv.Run(runCtx, st) }()
	fail := func(err error) error {
		stopRun()
		<-served
		_ = ep.Close()
		return err
	}
	// The in-memory transport is a net.Pipe, whose writes ignore the context: a client
	// connecting to a server whose Run already failed would block for good.
	select {
	case <-ready:
	case err := <-served:
		stopRun()
		_ = ep.Close()
		return fmt.Errorf("mcp server: %w", err)
	}
	if ok, why, _ := ep.Backstop("general"); !ok {
		return fail(fmt.Errorf("%s: %s", cm.spec.Principal, why))
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return fail(fmt.Errorf("mcp client: %w", err))
	}
	quit, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cm.watch = func(want int) {
		once.Do(func() { go cm.pollInbox(ctx, cs, want, quit, done) })
	}
	cm.peek = func() string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cotal_inbox", Arguments: map[string]any{"peek": true}})
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				for _, line := range strings.Split(t.Text, "\n") {
					if i := strings.Index(line, closeMark); i >= 0 {
						out = append(out, strings.TrimSpace(line[i+len(closeMark):]))
					}
				}
			}
		}
		return strings.Join(out, ",")
	}
	cm.stop = func() {
		once.Do(func() { close(done) }) // never watched
		close(quit)
		<-done
	}
	cm.close = func() error {
		defer stopRun()
		_ = cs.Close()
		if err := <-served; err != nil {
			_ = ep.Close()
			return err
		}
		return ep.Close()
	}
	return nil
}

// pollInbox reads the session's inbox resource every 100 ms until it holds want
// messages or quit closes, and records what it holds.
func (cm *closeMember) pollInbox(ctx context.Context, cs *mcp.ClientSession, want int, quit, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(100 * time.Millisecond)
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
			if n >= want {
				return
			}
		}
	}
}

// BenchmarkClose200: 200 members of the durable channel general, each on its own
// authenticated connection to a real embedded broker with the delivery daemon serving,
// read a round of posts and then all close at once. Each round reports the p50 and p99 of
// one close and the time until the last one returned, against a baseline measured in the
// same round: 200 plain nats.Conn of the same credentials closing at once (p99/conn), and
// one member closing alone after a round (p99/alone). The sessions are endpoint
// (client.Endpoint.Close, which is what `cotal join` does at its end, plus saving its
// history cursor file) and mcp (`cotal mcp`: the MCP session ends with every post of the
// round unread in the server's inbox, handed back, then the endpoint closes). Each round
// reopens the members as the next session of the same incarnations; an mcp round waits
// until every member holds the posts of every earlier mcp round too, so a copy lost at a
// close fails the round (naming the members short). -closeprofile DIR writes CPU and
// block profiles of the first endpoint round's closes.
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
	// every member's session took want messages, then stops the sessions' readers.
	rounds := 0
	round := func(b *testing.B, kind string, want int) {
		b.Helper()
		rounds++
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
			if _, err := alice.Post(b.Context(), "general", client.Text(closeMark+" r"+strconv.Itoa(rounds)+"."+strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		for _, cm := range members {
			if cm.watch != nil {
				cm.watch(want)
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var short []string
			for _, cm := range members {
				if n := cm.taken(); n < want {
					short = append(short, fmt.Sprintf("%s %d", cm.spec.Principal.Actor, n))
				}
			}
			if len(short) == 0 {
				break
			}
			if time.Now().After(deadline) {
				logged := 0
				for _, cm := range members {
					if cm.peek != nil && cm.taken() < want && logged < 3 {
						logged++
						b.Logf("%s holds: %s", cm.spec.Principal.Actor, cm.peek())
					}
				}
				b.Fatalf("close round (%s): %d members short of %d messages: %v", kind, len(short), want, short)
			}
			time.Sleep(10 * time.Millisecond)
		}
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
			// want is what a round's sessions must take. An endpoint acks every post, an
			// mcp session none: each mcp round's posts are handed back at its close and
			// wait in the next one's inbox with the new posts, so a copy lost at a close
			// leaves the next round short.
			want := 0
			next := func() int {
				if kind == "mcp" {
					want += closePosts
				} else {
					want = closePosts
				}
				return want
			}
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
					round(b, kind, next())
					took, _ = closeAll(b, closers(members[:1]))
					alones = append(alones, took[0])
					closeAll(b, closers(members[1:]))
				}

				round(b, kind, next())
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
