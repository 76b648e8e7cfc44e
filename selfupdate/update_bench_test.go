package selfupdate_test

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkUpdateVerifiedVsReinstall measures `cotal update` on a machine with 5 current
// first-party extensions, verified in the update process, against the same update with
// every extension reinstalled in a child process (--reinstall), in the same run. It
// reports the ratio reinstall/verified (the verified path should be at least 10x faster)
// and each path's time per update.
//
//	go test -run '^$' -bench BenchmarkUpdateVerifiedVsReinstall ./selfupdate/
func BenchmarkUpdateVerifiedVsReinstall(b *testing.B) {
	m := newMachine(b)
	src := b.TempDir()
	for i := range 5 {
		m.install(b, script(b, src, fmt.Sprintf("cotal-e%d", i), "v1.0.0"), true)
	}
	verified := m.updater(b, "v1.0.0", nil)
	reinstall := m.updater(b, "v1.0.0", nil)
	reinstall.ReinstallAll = true
	var tv, tr time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		res, err := verified.Run(b.Context())
		if err != nil || res.Verified != 5 {
			b.Fatalf("verified update: %+v %v", res, err)
		}
		mid := time.Now()
		res, err = reinstall.Run(b.Context())
		if err != nil || res.Reinstalled != 5 {
			b.Fatalf("reinstalling update: %+v %v", res, err)
		}
		tv += mid.Sub(start)
		tr += time.Since(mid)
		n++
	}
	b.ReportMetric(float64(tr)/float64(tv), "reinstall/verified")
	b.ReportMetric(float64(tv.Microseconds())/float64(n), "verified-µs/update")
	b.ReportMetric(float64(tr.Microseconds())/float64(n), "reinstall-µs/update")
}
