package liveness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
)

// childAgentEnv names the file of the agent a child test process runs (TestChildAgent).
const childAgentEnv = "COTAL_LIVENESS_AGENT"

// agentConfig is what a child process needs to join the space as one agent.
type agentConfig struct {
	URL   string
	Creds []byte
}

// TestChildAgent is not a test: it is the body of the child process startChildAgent
// runs, one agent holding its own connection, so the benchmark can SIGKILL a real
// process. SIGTERM makes it leave cleanly.
func TestChildAgent(t *testing.T) {
	path := os.Getenv(childAgentEnv)
	if path == "" {
		t.Skip("the body of a child process (startChildAgent)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c agentConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	cr, err := trust.ReadCreds(c.Creds)
	if err != nil {
		t.Fatal(err)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ep, err := client.Connect(context.Background(), c.URL, client.Config{Space: space, Name: cr.Principal.Actor,
		LifecycleUID: cr.LifecycleUID, Heartbeat: time.Hour}, nats.UserJWTAndSeed(cr.JWT, cr.Seed), nats.CustomInboxPrefix(cr.InboxPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("joined")
	<-term
	_ = ep.Close()
}

// startChildAgent runs actor as a child process joined to the fixture's space and
// returns the process once it has joined.
func (f *fixture) startChildAgent(actor string) *os.Process {
	f.t.Helper()
	b, err := json.Marshal(agentConfig{URL: f.url, Creds: f.agentCreds(actor, protocol.NewLifecycleUID())})
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.t.TempDir(), actor+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildAgent$", "-test.v")
	cmd.Env = append(os.Environ(), childAgentEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	joined := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "joined" {
				joined <- true
			}
		}
		joined <- false
		_ = cmd.Wait()
	}()
	select {
	case ok := <-joined:
		if !ok {
			f.t.Fatalf("child agent %s ended before it joined", actor)
		}
	case <-time.After(60 * time.Second):
		f.t.Fatalf("child agent %s did not join", actor)
	}
	return cmd.Process
}

// BenchmarkOfflineAfterKill measures, over real agent processes, how long after a
// SIGKILL a presence reader (a KV watch of the roster's bucket) sees the agent offline:
// the broker's event, the watcher's write. The baseline, measured in the same run, is a
// SIGTERM: the agent leaves cleanly and writes its own offline row. Each iteration kills
// one agent and stops another; run it with -benchtime=100x for 100 kills. It reports
// p50 and p99 of both in milliseconds and the ratio of the medians.
func BenchmarkOfflineAfterKill(b *testing.B) {
	f := start(b)
	var kill, term []time.Duration
	for i := 0; b.Loop(); i++ {
		for _, s := range []struct {
			sig  os.Signal
			name string
			into *[]time.Duration
		}{{syscall.SIGKILL, fmt.Sprintf("kill%d", i), &kill}, {syscall.SIGTERM, fmt.Sprintf("term%d", i), &term}} {
			b.StopTimer()
			p := f.startChildAgent(s.name)
			seen := f.watchOffline(s.name)
			b.StartTimer()
			t0 := time.Now()
			if err := p.Signal(s.sig); err != nil {
				b.Fatal(err)
			}
			*s.into = append(*s.into, wait(b, seen).Sub(t0))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	k50, k99, t50, t99 := quantile(kill, 0.5), quantile(kill, 0.99), quantile(term, 0.5), quantile(term, 0.99)
	b.ReportMetric(ms(k50), "kill-p50-ms")
	b.ReportMetric(ms(k99), "kill-p99-ms")
	b.ReportMetric(ms(t50), "term-p50-ms")
	b.ReportMetric(ms(t99), "term-p99-ms")
	if t50 > 0 {
		b.ReportMetric(float64(k50)/float64(t50), "kill/term-p50")
	}
}
