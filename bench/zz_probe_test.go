package bench

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/trust"
)

func fdCount() int {
	es, _ := os.ReadDir("/proc/self/fd")
	return len(es)
}

func fdKinds() map[string]int {
	es, _ := os.ReadDir("/proc/self/fd")
	m := map[string]int{}
	for _, e := range es {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		k := "other"
		switch {
		case len(l) > 7 && l[:7] == "socket:":
			k = "socket"
		case len(l) > 0 && l[0] == '/':
			if len(l) > 4 && l[len(l)-4:] == ".blk" {
				k = "blk"
			} else {
				k = "file"
			}
		}
		m[k]++
	}
	return m
}

func TestProbeFDs(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROBE_N"))
	w := &laneWorld{kind: "delivery", n: n, creds: map[string][]byte{}}
	var err error
	if w.chain, err = trust.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err = w.chain.Space(fmt.Sprintf("s%04d", i)); err != nil {
			t.Fatal(err)
		}
		if _, _, err = w.chain.SetLimits(fmt.Sprintf("s%04d", i), trust.Limits{Storage: 1 << 20, Memory: 1 << 20, Streams: 100, Consumers: 1000, Conns: 1000, Subs: 1000, Payload: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	jwts, _ := w.chain.AccountJWTs()
	srv := &broker.Server{Dir: t.TempDir(), Port: -1, OperatorJWT: w.chain.OperatorJWT(),
		SystemAccount: w.chain.SystemAccount(), Accounts: jwts,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	w.url = srv.ClientURL()
	t.Logf("start: fds=%d %v", fdCount(), fdKinds())
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := w.provision(t.Context(), fmt.Sprintf("s%04d", i)); err != nil {
			t.Fatalf("space %d after %s: fds=%d %v: %v", i, time.Since(start), fdCount(), fdKinds(), err)
		}
		if i%50 == 0 {
			t.Logf("space %d t=%s fds=%d %v", i, time.Since(start).Round(time.Millisecond), fdCount(), fdKinds())
		}
	}
	for range 8 {
		time.Sleep(20 * time.Second)
		t.Logf("idle t=%s fds=%d %v", time.Since(start).Round(time.Millisecond), fdCount(), fdKinds())
	}
}
