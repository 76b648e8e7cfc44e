package broker

import (
	"runtime"
	"sync"
)

// APIWorkers is how many goroutines the broker's server answers JetStream API requests
// (stream and consumer creates, infos, KV binds) with. nats-server starts one a
// GOMAXPROCS, at most 16, so a 2-core host had 2: a request waits in the server's queue
// while both are blocked in the file store (a consumer create writes its files, and on a
// broker of thousands of spaces the store's own sync passes keep the disk busy), and info
// requests, which the server puts behind every create, waited past their clients'
// timeouts with half the CPU idle. The broker starts its server with at least
// APIWorkers of them: nats-server's own bound, whatever the host's cores.
const APIWorkers = 16

// procsMu serialises the windows in which starting servers widen GOMAXPROCS: it is
// process-wide, and two starts interleaving their restores could leave it widened.
var procsMu sync.Mutex

// withProcs runs start with GOMAXPROCS at least n and then puts it back: nats-server
// sizes its JetStream API worker pool from GOMAXPROCS while it starts, and reads it
// nowhere else that outlives the start. The widened window lasts only as long as start.
func withProcs(n int, start func()) {
	procsMu.Lock()
	defer procsMu.Unlock()
	if prev := runtime.GOMAXPROCS(0); prev < n {
		runtime.GOMAXPROCS(n)
		defer restoreProcs(prev)
	}
	start()
}

// restoreProcs puts GOMAXPROCS back to prev. Setting it by hand would stop the runtime
// from following the host's CPU limit from then on, so when prev is the runtime's own
// default the default is restored instead, and only a value the process chose (the
// GOMAXPROCS environment variable, or a call of its own) is set again by hand.
func restoreProcs(prev int) {
	runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) != prev {
		runtime.GOMAXPROCS(prev)
	}
}
