package broker_test

import (
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
)

// A broker on a host of few cores still answers the JetStream API with APIWorkers
// goroutines (nats-server would start one a GOMAXPROCS), and leaves GOMAXPROCS as it
// found it (issue 30 item 6).
func TestAPIWorkersWhateverTheCores(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	before := apiWorkers(t)

	srv := &broker.Server{Dir: t.TempDir(), Port: -1, Logger: brokertest.Logger(t)}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	if got := apiWorkers(t) - before; got != broker.APIWorkers {
		t.Errorf("the server answers the JetStream API with %d goroutines at GOMAXPROCS 1, want %d", got, broker.APIWorkers)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS is %d after Start, want the 1 it was", got)
	}
}

// apiWorkers counts the goroutines of this process serving nats-server's JetStream API
// queue.
func apiWorkers(t *testing.T) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "server.(*Server).processJSAPIRoutedRequests(") {
			n++
		}
	}
	return n
}
