package client_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cputime"
	"github.com/cotal-ai/cotal/protocol"
)

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// BenchmarkWatchPresenceSpam: one peer writes its presence key 20 000 times (a new
// activity each time) under four watches, in three phases of the same run: no watch
// (the broker and the writer alone), the per-write watch (decode and apply every write,
// as before records were held) and WatchPresence. It reports, per 20 000 writes, the
// process CPU of each phase, the watches' share (phase minus no watch), the decodes, and
// watch-ratio = the coalesced watches' CPU over the per-write ones'.
func BenchmarkWatchPresenceSpam(b *testing.B) {
	const writes, watches = 20000, 4
	url := mesh(b)
	rig := newSpamRig(b, url)
	recs := make([][]byte, writes)
	for i := range recs {
		recs[i] = presenceRecord(b, "spammer", protocol.StatusWorking, "step "+strconv.Itoa(i), time.Now())
	}
	subject := rig.prefix + protocol.OwnerLocal + ".spammer"
	type phase struct {
		name    string
		watch   func(context.Context, *client.Endpoint, *atomic.Int64) (<-chan client.PeerChange, error)
		cpu     time.Duration
		decodes int64
	}
	phases := []*phase{
		{name: "none"},
		{name: "per-write", watch: client.WatchPresencePerWrite},
		{name: "coalesced", watch: func(ctx context.Context, e *client.Endpoint, d *atomic.Int64) (<-chan client.PeerChange, error) {
			return client.WatchPresenceCounting(ctx, e, false, d)
		}},
	}
	round := 0
	for b.Loop() {
		for _, p := range phases {
			round++
			last := "last " + strconv.Itoa(round)
			ctx, cancel := context.WithCancel(b.Context())
			var decodes atomic.Int64
			var seen []chan struct{}
			for range watches {
				if p.watch == nil {
					break
				}
				changes, err := p.watch(ctx, watcher(b, url), &decodes)
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan struct{})
				go func() {
					for c := range changes {
						if c.Activity == last {
							close(got)
							break
						}
					}
					for range changes { // drain until the watch ends
					}
				}()
				seen = append(seen, got)
			}
			cpu0 := cpuTime()
			for _, r := range recs {
				if err := rig.nc.Publish(subject, r); err != nil {
					b.Fatal(err)
				}
			}
			rig.put(b, "spammer", protocol.StatusWorking, last)
			for _, got := range seen {
				select {
				case <-got:
				case <-time.After(time.Minute):
					b.Fatalf("%s: a watch never saw the last write", p.name)
				}
			}
			p.cpu += cpuTime() - cpu0
			p.decodes += decodes.Load()
			cancel()
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
	base := phases[0].cpu
	for _, p := range phases {
		b.ReportMetric(ms(p.cpu), "cpu-ms/"+p.name)
		if p.watch != nil {
			b.ReportMetric(ms(p.cpu-base), "watch-cpu-ms/"+p.name)
			b.ReportMetric(float64(p.decodes)/n/watches, "decodes/"+p.name)
		}
	}
	if d := phases[1].cpu - base; d > 0 {
		b.ReportMetric(float64(phases[2].cpu-base)/float64(d), "watch-ratio")
	}
	b.ReportMetric(float64(phases[2].cpu)/float64(phases[1].cpu), "cpu-ratio")
}
