package liveness_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/liveness"
	"github.com/cotal-ai/cotal/protocol"
)

// openConns counts the connections of actor the (single) server lists, asked on sys.
func openConns(t testing.TB, sys *nats.Conn, account, actor string) int {
	t.Helper()
	body, err := json.Marshal(map[string]any{"acc": account, "auth": true, "limit": 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sys.Request("$SYS.REQ.SERVER.PING.CONNZ", body, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Data struct {
			Conns []struct {
				Tags []string `json:"tags"`
			} `json:"connections"`
		} `json:"data"`
	}
	if err := json.Unmarshal(m.Data, &page); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range page.Data.Conns {
		if slices.Contains(c.Tags, "actor:"+actor) {
			n++
		}
	}
	return n
}

// TestSystemConnDropCaughtUp: the watcher's own system connection drops. It says so
// (Following(false)); while it is away an agent's connection closes unheard; when its
// connection is back it says so again, and its catch-up sweep marks that agent offline
// (without it only the TTL would), leaving an agent still connected online.
func TestSystemConnDropCaughtUp(t *testing.T) {
	f := startMesh(t)
	account := f.m.Account(space).PublicKey()
	direct := meshtest.SystemConn(t, f.m.Chain, f.m.URL)
	creds, err := f.m.Chain.WatchCreds(space) // the daemon's least-privilege credential
	if err != nil {
		t.Fatal(err)
	}
	spx := newProxy(t, f.m.URL)
	sys := meshtest.ConnectTo(t, spx.url(), creds, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectJitter(0, 0))
	following := make(chan bool, 16)
	f.watchOn(sys, account, func(w *liveness.Watcher) { w.Following = func(b bool) { following <- b } })
	expect := func(want bool) {
		t.Helper()
		select {
		case got := <-following:
			if got != want {
				t.Fatalf("Following(%v), want Following(%v)", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the watcher never reported Following(%v)", want)
		}
	}

	apx := newProxy(t, f.m.URL)
	f.join(apx.url(), f.agentCreds("alice", protocol.NewLifecycleUID()), time.Hour)
	f.join(f.m.URL, f.agentCreds("bob", protocol.NewLifecycleUID()), time.Hour)

	spx.refusing.Store(true)
	spx.cut()
	expect(false)
	apx.down() // alice's connection closes while the watcher cannot hear it
	meshtest.Until(t, "the broker closed alice's connection", 10*time.Second, func() bool {
		return openConns(t, direct, account, "alice") == 0
	})
	if st, _ := f.status("alice"); st != protocol.StatusIdle {
		t.Fatalf("alice is %q while the watcher is away, want idle (nothing heard her close)", st)
	}

	spx.refusing.Store(false)
	expect(true)
	select {
	case p := <-f.marked:
		if p.Actor != "alice" {
			t.Fatalf("%s marked offline, want alice", p)
		}
	case <-time.After(30 * time.Second): // a hang guard: only the watcher's Marked sends on f.marked, never a TTL
		t.Fatal("alice, gone while the watcher was away, was not marked offline when it came back")
	}
	if st, _ := f.status("alice"); st != protocol.StatusOffline {
		t.Fatalf("alice is %q, want offline", st)
	}
	if st, _ := f.status("bob"); st != protocol.StatusIdle {
		t.Fatalf("bob is %q, want idle", st)
	}
	// And it follows the events again.
	if before := f.sentinel("sentinel"); len(before) > 0 {
		t.Fatalf("%v marked offline after the catch-up", before)
	}
}
