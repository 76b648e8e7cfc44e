package liveness_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/protocol"
)

// BenchmarkOfflineAfterCut measures how long after a network cut a presence reader sees
// the agent offline (the watcher's path), against the baseline of a clean leave (the
// agent writes its own offline row) measured in the same run. It reports the medians and
// p99s in milliseconds and the ratio of the medians.
func BenchmarkOfflineAfterCut(b *testing.B) {
	f := start(b)
	var cut, leave []time.Duration
	for i := 0; b.Loop(); i++ {
		// The watcher's path: the connection is cut, the agent never comes back.
		name := fmt.Sprintf("cut%d", i)
		px := newProxy(b, f.url)
		f.join(px.url(), f.agentCreds(name, protocol.NewLifecycleUID()), time.Hour)
		seen := f.watchOffline(name)
		t0 := time.Now()
		px.down()
		cut = append(cut, wait(b, seen).Sub(t0))

		// The baseline: a clean leave.
		name = fmt.Sprintf("leave%d", i)
		ep := f.join(f.url, f.agentCreds(name, protocol.NewLifecycleUID()), time.Hour)
		seen = f.watchOffline(name)
		t0 = time.Now()
		_ = ep.Close()
		leave = append(leave, wait(b, seen).Sub(t0))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	c50, c99, l50, l99 := quantile(cut, 0.5), quantile(cut, 0.99), quantile(leave, 0.5), quantile(leave, 0.99)
	b.ReportMetric(ms(c50), "cut-p50-ms")
	b.ReportMetric(ms(c99), "cut-p99-ms")
	b.ReportMetric(ms(l50), "leave-p50-ms")
	b.ReportMetric(ms(l99), "leave-p99-ms")
	if l50 > 0 {
		b.ReportMetric(float64(c50)/float64(l50), "cut/leave-p50")
	}
}

func wait(b *testing.B, seen <-chan time.Time) time.Time {
	b.Helper()
	select {
	case at := <-seen:
		return at
	case <-time.After(30 * time.Second):
		b.Fatal("never seen offline")
		return time.Time{}
	}
}

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
