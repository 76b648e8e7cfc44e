package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/authsvc"
	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/oidc/oidctest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/trust"
)

// lanesEnv narrows BenchmarkLanes to some lane counts: COTAL_BENCH_LANES=1,10. The
// sub-benchmark names select too: -bench 'Lanes/.*/N=(1|10)$'.
const lanesEnv = "COTAL_BENCH_LANES"

// provisionConnectWait bounds a provisioner's connect and each of its JetStream requests
// while thousands of spaces are being created (nats.go's defaults, 2 s and 5 s, are too
// short on a loaded 2-core machine).
const provisionConnectWait = time.Minute

// provisionConnectAttempts is how many times a provisioner tries to connect before its
// space's setup fails.
const provisionConnectAttempts = 5

// progressEvery is how many spaces apart setup reports its progress on stderr (a run of
// thousands of spaces takes long enough that a stopped run should say how far it got).
const progressEvery = 500

// laneReadyLimit guards the wait for a host's ready callback, and its close, against a
// hang: 5 minutes, and 200 ms a lane beyond 1500 lanes.
func laneReadyLimit(n int) time.Duration {
	return max(5*time.Minute, time.Duration(n)*200*time.Millisecond)
}

// BenchmarkLanes runs one space host in this process with N spaces, auth-service lanes
// (authsvc.Serve on a version 2 manifest) and then delivery lanes (spacehost.Host of
// delivery.Lane, as `cotal deliver --spaces` builds them), against one operator-mode
// broker whose spaces are provisioned before the clock starts. The broker is embedded in
// this process by default; with COTAL_BENCH_LANES_BROKER=process it runs, and provisions
// the spaces, in a child process (this test binary again, as TestLanesBrokerChild), as a
// lane host runs beside its broker in production. Per N it reports:
//
//   - ready-ms: from starting the host to its ready callback naming every space serving;
//   - heap-KiB/lane: Go heap in use (after a GC) once ready, minus before, over N. With
//     the broker embedded it includes the broker's share of each lane (its client and
//     subscription state);
//   - stack-KiB/lane: the same for goroutine stacks (lane side, and broker side when
//     embedded);
//   - rss-KiB/lane: the same difference of the process's resident set (Linux only);
//   - broker-rss-KiB/lane: the same for the broker process, when it runs in one (Linux
//     only; read without a GC there, so it includes garbage);
//   - conns/lane: the broker's client connections (VARZ) once ready, minus before, over N;
//   - goroutines/lane: likewise for this process's goroutines;
//   - sockets/lane: likewise for the process's open sockets: with the broker embedded a
//     lane's broker connection is a socket at each end, both in this process, so this is
//     twice its connections;
//   - fds/lane: likewise for all the process's open files (with the broker embedded these
//     include the store's block files, which the broker closes once idle: provisioning's
//     close during a round, so this can fall below the sockets, and below zero);
//   - setup-ms/space: accounts, broker start and provisioning, outside the timed part.
//
// Setup runs once per N; each round starts the host, waits for ready, samples and closes
// it. Run: go test -run '^$' -bench Lanes -benchtime 1x -timeout 60m ./bench/
// With -cpuprofile, samples of goroutines this process starts carry the label lanes=setup
// or lanes=host (pprof -tagfocus lanes=host); the broker's client loops carry none.
func BenchmarkLanes(b *testing.B) {
	counts := laneCounts(b)
	for _, kind := range []string{"auth", "delivery"} {
		b.Run(kind, func(b *testing.B) {
			for _, n := range counts {
				b.Run("N="+strconv.Itoa(n), func(b *testing.B) { benchLanes(b, kind, n) })
			}
		})
	}
}

// laneCounts returns the lane counts from lanesEnv, or 1, 10, 100 and 500.
func laneCounts(b *testing.B) []int {
	v := os.Getenv(lanesEnv)
	if v == "" {
		return []int{1, 10, 100, 500}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive counts separated by commas", lanesEnv, v)
		}
		out = append(out, n)
	}
	return out
}

// benchLanes measures one host of n lanes of kind ("auth" or "delivery").
func benchLanes(b *testing.B, kind string, n int) {
	var w *laneWorld
	pprof.Do(b.Context(), pprof.Labels("lanes", "setup"), func(context.Context) { w = newLaneWorld(b, kind, n) })
	var ready time.Duration
	var heap, stack, rss, brokerRSS, conns, gor, fds, socks float64
	for b.Loop() {
		before := w.sample(b)
		pprof.Do(b.Context(), pprof.Labels("lanes", "host"), func(context.Context) {
			ready += w.runHost(b, func() { // called once ready, before the host closes
				after := w.sample(b)
				heap += float64(after.heap-before.heap) / 1024
				stack += float64(after.stack-before.stack) / 1024
				rss += float64(after.rss-before.rss) / 1024
				brokerRSS += float64(after.brokerRSS-before.brokerRSS) / 1024
				conns += float64(after.conns - before.conns)
				gor += float64(after.goroutines - before.goroutines)
				fds += float64(after.fds - before.fds)
				socks += float64(after.sockets - before.sockets)
			})
		})
	}
	rounds := float64(b.N)
	perLane := rounds * float64(n)
	// The figures again, before the broker's close (minutes at thousands of spaces).
	fmt.Fprintf(os.Stderr, "lanes %s N=%d (broker %s): ready %s, %.0f KiB heap, %.0f KiB resident, %.2f conns, %.2f sockets, %.2f fds, %.1f goroutines a lane\n",
		kind, n, laneBrokerMode(b), (ready / time.Duration(b.N)).Round(time.Millisecond), heap/perLane, rss/perLane, conns/perLane, socks/perLane, fds/perLane, gor/perLane)
	b.ReportMetric(float64(ready.Milliseconds())/rounds, "ready-ms")
	b.ReportMetric(heap/perLane, "heap-KiB/lane")
	b.ReportMetric(stack/perLane, "stack-KiB/lane")
	if w.rssKnown {
		b.ReportMetric(rss/perLane, "rss-KiB/lane")
	}
	if w.broker != nil && w.rssKnown {
		b.ReportMetric(brokerRSS/perLane, "broker-rss-KiB/lane")
	}
	b.ReportMetric(conns/perLane, "conns/lane")
	b.ReportMetric(gor/perLane, "goroutines/lane")
	b.ReportMetric(fds/perLane, "fds/lane")
	b.ReportMetric(socks/perLane, "sockets/lane")
	b.ReportMetric(float64(w.setup.Milliseconds())/float64(n), "setup-ms/space")
}

// laneWorld is an operator-mode broker with n provisioned spaces (user-auth spaces for
// auth lanes, each pinned to a test IdP) and the manifest that names them all.
type laneWorld struct {
	kind     string
	n        int
	chain    *trust.Chain
	url      string
	manifest string
	creds    map[string][]byte // delivery lanes: each space's delivery credential
	sys      *nats.Conn        // system account: asks the broker for VARZ
	setup    time.Duration
	rssKnown bool
	broker   *laneBroker // the broker's process, when it runs in one (nil in this process)
}

// laneLimits are each bench space's limits: the defaults with 2 MiB of storage and
// 1 MiB of memory, so that 5000 spaces' reservations (10 GiB) fit three quarters of the
// 16 GiB free on the machine measured (at 4 MiB the 2 980th space was refused).
func laneLimits() trust.Limits {
	l := trust.DefaultLimits()
	l.Storage, l.Memory = 2<<20, 1<<20
	return l
}

func newLaneWorld(b *testing.B, kind string, n int) *laneWorld {
	b.Helper()
	start := time.Now()
	w := &laneWorld{kind: kind, n: n}
	var err error
	if w.chain, err = trust.Open(b.TempDir()); err != nil {
		b.Fatal(err)
	}
	spaces := make([]string, n)
	for i := range spaces {
		spaces[i] = fmt.Sprintf("s%04d", i)
	}
	var issuer string
	if kind == "auth" {
		issuer = oidctest.Start(b, nil).URL // never asked: nobody signs in
	}
	for _, s := range spaces {
		if kind == "auth" {
			_, err = authsvc.Enable(w.chain, s, issuer, "cotal")
		} else {
			_, err = w.chain.Space(s)
		}
		if err != nil {
			b.Fatal(err)
		}
		// A host of thousands of spaces gives each a small share of the disk: the
		// broker reserves every space's storage and memory limit against its own.
		if _, _, err = w.chain.SetLimits(s, laneLimits()); err != nil {
			b.Fatal(err)
		}
	}
	if laneBrokerMode(b) == laneBrokerProcess {
		w.broker = startLaneBroker(b, laneChildConfig{TrustDir: w.chain.Dir(), Spaces: spaces, Kind: kind})
		w.url, w.creds = w.broker.url, w.broker.creds
	} else {
		srv, err := startLaneBrokerServer(b.Context(), w.chain, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		w.url = srv.ClientURL()
		if w.creds, err = provisionLaneSpaces(b.Context(), w.chain, srv, spaces, start); err != nil {
			b.Fatal(err)
		}
	}

	sysCreds, err := w.chain.SystemCreds(24 * time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	w.sys = dialCreds(b, w.url, sysCreds)

	w.manifest = filepath.Join(b.TempDir(), "spaces.json")
	var doc any = map[string]any{"version": 1, "spaces": spaces}
	if kind == "auth" {
		entries := make([]map[string]string, n)
		for i, s := range spaces {
			entries[i] = map[string]string{"space": s}
		}
		doc = map[string]any{"version": 2, "spaces": entries}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(w.manifest, data, 0o600); err != nil {
		b.Fatal(err)
	}
	_, w.rssKnown = residentBytes()
	w.setup = time.Since(start)
	return w
}

// lanesBrokerLogEnv names a file the lanes' broker writes its warnings and errors to
// (nats-server's own among them, such as accept errors); by default it logs nothing.
const lanesBrokerLogEnv = "COTAL_BENCH_LANES_BROKER_LOG"

// startLaneBrokerServer starts an operator-mode broker holding chain's accounts, its store
// under dir.
func startLaneBrokerServer(ctx context.Context, chain *trust.Chain, dir string) (*broker.Server, error) {
	jwts, err := chain.AccountJWTs()
	if err != nil {
		return nil, fmt.Errorf("account JWTs: %w", err)
	}
	srv := &broker.Server{Dir: dir, Port: -1, OperatorJWT: chain.OperatorJWT(),
		SystemAccount: chain.SystemAccount(), Accounts: jwts}
	if path := os.Getenv(lanesBrokerLogEnv); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lanesBrokerLogEnv, err)
		}
		// Left open: the broker logs into it until the process ends.
		srv.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	if c := srv.Capacity(); c.Spaces > 0 && len(jwts) > c.Spaces {
		fmt.Fprintf(os.Stderr, "lanes setup: %d accounts is more than the %d spaces this broker holds at once (open-file limit %d): provisioning relies on idle block files closing\n", len(jwts), c.Spaces, c.OpenFiles)
	}
	return srv, nil
}

// provisionLaneSpaces provisions spaces on srv, a few at a time (each is a handful of
// streams and buckets), and returns each space's delivery credential. It reports its
// progress on stderr every progressEvery spaces, counting time from start.
func provisionLaneSpaces(ctx context.Context, chain *trust.Chain, srv *broker.Server, spaces []string, start time.Time) (map[string][]byte, error) {
	n := len(spaces)
	creds := make(map[string][]byte, n)
	work := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for s := range work {
				if ctx.Err() != nil {
					continue // a space failed: skip the rest
				}
				dc, err := provisionLaneSpace(ctx, chain, srv, s)
				if err != nil {
					errs <- err
					stop()
					continue
				}
				mu.Lock()
				creds[s] = dc
				if done := len(creds); done%progressEvery == 0 {
					fmt.Fprintf(os.Stderr, "lanes setup: %d of %d spaces provisioned in %s, %d open files\n",
						done, n, time.Since(start).Round(time.Second), openFDs())
				}
				mu.Unlock()
			}
		})
	}
	for _, s := range spaces {
		work <- s
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return creds, nil
}

// provisionLaneSpace creates space's streams and buckets as its provisioner and returns
// its delivery daemon's credential.
func provisionLaneSpace(ctx context.Context, chain *trust.Chain, srv *broker.Server, space string) ([]byte, error) {
	acct, err := chain.Space(space)
	if err != nil {
		return nil, err
	}
	prov, err := acct.Mint(trust.UserSpec{Name: "bench provisioner", Profile: trust.ProfileProvisioner})
	if err != nil {
		return nil, err
	}
	c, err := trust.ReadCreds(prov)
	if err != nil {
		return nil, err
	}
	// Thousands of spaces keep the broker busy: a connect may wait its turn, and at
	// thousands of accounts the broker's authentication of one can overrun its 2 s
	// (Authentication Timeout). Setup is not what is measured: try again, and say so.
	var nc *nats.Conn
	for attempt := 1; ; attempt++ {
		nc, err = nats.Connect(srv.ClientURL(), nats.UserJWTAndSeed(c.JWT, c.Seed), nats.Timeout(provisionConnectWait))
		if err == nil {
			break
		}
		if attempt == provisionConnectAttempts || ctx.Err() != nil {
			return nil, fmt.Errorf("provisioner of %s, attempt %d: %w", space, attempt, err)
		}
		fmt.Fprintf(os.Stderr, "lanes setup: provisioner of %s, attempt %d: %v; trying again\n", space, attempt, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(provisionConnectWait))
	if err != nil {
		return nil, err
	}
	if _, err := provision.Space(ctx, js, space, provision.Options{Room: func(streams int) error { return srv.WaitRoom(ctx, streams) }}); err != nil {
		return nil, fmt.Errorf("provision %s: %w", space, err)
	}
	return acct.Mint(trust.UserSpec{Name: "cotal deliver", Profile: trust.ProfileDelivery,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_delivery"}})
}

// runHost starts the host, waits until every lane serves, calls atReady, then closes the
// host and waits for it. It returns the time from start to ready.
func (w *laneWorld) runHost(b *testing.B, atReady func()) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	readyCh := make(chan spacehost.Ready, 1)
	done := make(chan error, 1)
	onReady := func(r spacehost.Ready) { readyCh <- r }
	start := time.Now()
	go func() {
		if w.kind == "auth" {
			done <- authsvc.Serve(ctx, authsvc.Config{TrustDir: w.chain.Dir(), Server: w.url, Spaces: w.manifest}, onReady, nil)
			return
		}
		h := &spacehost.Host{
			Manifest: w.manifest,
			Policy:   spacehost.ServeWhatYouCan,
			NewLane: func(e spacehost.Entry, log *slog.Logger) (spacehost.Lane, error) {
				return &delivery.Lane{Space: e.Space, Server: w.url, Creds: w.creds[e.Space], Logger: log}, nil
			},
		}
		done <- h.Run(ctx, onReady)
	}()
	var took time.Duration
	select {
	case r := <-readyCh:
		took = time.Since(start)
		if len(r.Retrying) > 0 {
			f := r.Retrying[0]
			// Closing a broker of thousands of spaces takes minutes and b.Fatalf's text
			// shows only after it: say now why the lanes failed, the distinct causes.
			causes := map[string]int{}
			for _, f := range r.Retrying {
				causes[laneCause(f.Err)]++
			}
			fmt.Fprintf(os.Stderr, "lanes %s N=%d: ready after %s with %d of %d lanes serving, %d retrying\n",
				w.kind, w.n, took.Round(time.Millisecond), len(r.Serving), w.n, len(r.Retrying))
			shown := 0
			for cause, n := range causes {
				if shown++; shown > 5 {
					break
				}
				fmt.Fprintf(os.Stderr, "lanes %s N=%d: %d lanes failed: %s\n", w.kind, w.n, n, cause)
			}
			b.Fatalf("%s host: %d of %d lanes serve; %d retry, %s first: %v",
				w.kind, len(r.Serving), w.n, len(r.Retrying), f.Space, f.Err)
		}
		if len(r.Serving) != w.n {
			b.Fatalf("%s host: %d of %d lanes serve", w.kind, len(r.Serving), w.n)
		}
	case err := <-done:
		b.Fatalf("%s host ended before ready: %v", w.kind, err)
	case <-time.After(laneReadyLimit(w.n)):
		b.Fatalf("%s host of %d lanes not ready within %s", w.kind, w.n, laneReadyLimit(w.n))
	}
	atReady()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			b.Fatalf("%s host: %v", w.kind, err)
		}
	case <-time.After(laneReadyLimit(w.n)):
		b.Fatalf("%s host of %d lanes did not close", w.kind, w.n)
	}
	return took
}

// laneAddr matches the host:port pairs and space names in a lane's error, which differ
// from lane to lane.
var laneAddr = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+|\bs\d{4}\b`)

// laneCause is a lane's error with its addresses and space name blanked, so that lanes
// failing the same way count as one cause.
func laneCause(err error) string { return laneAddr.ReplaceAllString(err.Error(), "…") }

// laneSample is the process and broker at one instant.
type laneSample struct {
	heap, stack int64 // Go heap and goroutine stacks in use after a GC
	rss         int64 // resident set after returning freed memory to the OS; 0 when unknown
	conns       int   // the broker's client connections
	goroutines  int
	fds         int   // open file descriptors of this process (broker and lanes); 0 when unknown
	sockets     int   // those of them that are sockets
	brokerRSS   int64 // the broker process's resident set, when it runs in one; 0 when unknown
}

// sample collects garbage and returns what it freed to the OS (so the resident set does
// not keep a previous round's pages), then reads the heap, the stacks, the resident set,
// the goroutines and the broker's connection count.
func (w *laneWorld) sample(b *testing.B) laneSample {
	b.Helper()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ := residentBytes()
	s := laneSample{heap: int64(ms.HeapInuse), stack: int64(ms.StackInuse), rss: rss, conns: brokerConns(b, w.sys), goroutines: runtime.NumGoroutine(), fds: openFDs(), sockets: openSockets()}
	if w.broker != nil {
		s.brokerRSS, _ = w.broker.resident()
	}
	return s
}

// brokerConns asks the broker, over a system-account connection, how many client
// connections it holds (VARZ "connections"; the asking connection included).
func brokerConns(b *testing.B, sys *nats.Conn) int {
	b.Helper()
	msg, err := sys.Request("$SYS.REQ.SERVER.PING.VARZ", nil, 10*time.Second)
	if err != nil {
		b.Fatalf("varz: %v", err)
	}
	var resp struct {
		Data struct {
			Connections int `json:"connections"`
		} `json:"data"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		b.Fatalf("varz: %v", err)
	}
	if resp.Error != nil {
		b.Fatalf("varz: %s", resp.Error.Description)
	}
	return resp.Data.Connections
}

// openFDs counts this process's open file descriptors (/proc/self/fd); 0 where that
// directory does not exist.
func openFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(es)
}

// openSockets counts this process's open sockets (/proc/self/fd entries that link to
// socket:[inode]); 0 where that directory does not exist.
func openSockets() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range es {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// residentBytes is this process's resident set (VmRSS in /proc/self/status); false where
// that file does not exist.
func residentBytes() (int64, bool) { return residentOf("/proc/self/status") }
