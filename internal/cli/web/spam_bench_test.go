package web_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/web"
	"github.com/cotal-ai/cotal/internal/cputime"
	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// cpuTime is the CPU this process has used (user and system).
func cpuTime(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// spamRun serves a dashboard (watcher, model, HTTP feed with feeds SSE readers) on url
// with the given coalescing intervals (negative: none), has one agent write its own
// presence key writes times as fast as it can, then its final state until every feed has
// shown it, and returns the process CPU that took and the roster events the feeds sent.
func spamRun(b *testing.B, url string, every time.Duration, feeds, writes int) (time.Duration, int) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	ep, err := client.Connect(ctx, url, client.Config{Space: space, Name: "web", Kind: protocol.CardEndpoint, Logger: brokertest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	m := meshview.New(meshview.Config{})
	w := &meshview.Watcher{Endpoint: ep, Model: m, DMs: true, PresenceEvery: every}
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- w.Run(ctx, func() { close(ready) }) }()
	<-ready
	srv := httptest.NewServer((&web.Server{Space: space, Model: m, RosterEvery: every}).Handler())
	defer func() { srv.CloseClientConnections(); srv.Close() }() // the feeds never end by themselves

	var (
		mu     sync.Mutex
		events int
		wg     sync.WaitGroup
	)
	for range feeds {
		feed := openFeed(b, srv.URL, "")
		next(b, feed, "snapshot")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range feed {
				if ev.typ != "roster" {
					continue
				}
				mu.Lock()
				events++
				mu.Unlock()
				if strings.Contains(ev.data, `"activity":"final"`) {
					return
				}
			}
		}()
	}
	allSeen := make(chan struct{})
	go func() { wg.Wait(); close(allSeen) }()

	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	subject := "$KV." + protocol.BucketPresence(space) + ".local.spammer"
	record := func(activity string) []byte {
		p, _ := json.Marshal(protocol.Presence{Card: protocol.AgentCard{ID: "local.spammer", Name: "spammer", Kind: protocol.CardAgent},
			Status: protocol.StatusWorking, TS: time.Now().UnixMilli(), Activity: activity})
		return p
	}
	spam := make([][]byte, writes) // each write changes the activity, as a loop would
	for i := range spam {
		spam[i] = record("spam " + strconv.Itoa(i))
	}
	start := cpuTime(b)
	for i := range writes {
		if err := nc.Publish(subject, spam[i]); err != nil {
			b.Fatal(err)
		}
	}
	// The final state until every feed shows it (the SDK's watch may drop records while
	// the spam lasts).
	guard := time.After(60 * time.Second) // a hang guard only
	for seen := false; !seen; {
		if err := nc.Publish(subject, record("final")); err != nil {
			b.Fatal(err)
		}
		select {
		case <-allSeen:
			seen = true
		case <-time.After(200 * time.Millisecond): // write it again: nothing else to wait on
		case <-guard:
			b.Fatal("the feeds never showed the final state")
		}
	}
	used := cpuTime(b) - start
	mu.Lock()
	defer mu.Unlock()
	return used, events
}

// BenchmarkPresenceSpam: one agent writes its own presence key 20 000 times while four
// browsers watch. It reports the process's CPU and the roster events the feeds sent with
// coalescing (the defaults) as a ratio of the same without it, in the same run on the same
// broker (below 1: coalescing saves that share), and each mode's CPU per 1000 writes.
func BenchmarkPresenceSpam(b *testing.B) {
	url := openMesh(b)
	const writes, feeds = 20_000, 4
	for b.Loop() {
		cpuEvery, evEvery := spamRun(b, url, -1, feeds, writes)
		cpuCo, evCo := spamRun(b, url, 0, feeds, writes)
		b.ReportMetric(float64(cpuCo)/float64(cpuEvery), "cpu-coalesced/every")
		b.ReportMetric(float64(evCo)/float64(evEvery), "sse-coalesced/every")
		b.ReportMetric(float64(cpuEvery.Milliseconds())*1000/writes, "cpu-ms/1k-writes-every")
		b.ReportMetric(float64(cpuCo.Milliseconds())*1000/writes, "cpu-ms/1k-writes-coalesced")
		b.ReportMetric(float64(evEvery), "sse-events-every")
		b.ReportMetric(float64(evCo), "sse-events-coalesced")
	}
}
