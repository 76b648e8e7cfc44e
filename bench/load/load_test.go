// Package load is the exactly-once load test: N agents, one connection each, on an
// authenticated mesh whose channel is durable (backed up per member by the delivery
// daemon), each posting M posts to one channel and reading everyone else's. It reports
// delivered/expected, duplicates shown to the application, order violations (a sender's
// posts out of order) and the p50/p99 post-to-read latency. It is run by hand, never in
// CI:
//
//	COTAL_LOAD=1 go test -run TestLoad -timeout 30m ./bench/load/ -args -agents 200 -posts 50
package load

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/delivery/deliverytest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

var (
	agents = flag.Int("agents", 200, "agents, one connection each")
	posts  = flag.Int("posts", 50, "posts per agent")
	quiet  = flag.Duration("quiet", 5*time.Second, "after every post is read, how long nothing more may arrive before the run ends (late duplicates show here)")
	stall  = flag.Duration("stall", 2*time.Minute, "give up when nothing new arrives for this long")
)

const (
	sp      = "load"
	channel = "general"
)

// reader is what one agent was shown.
type reader struct {
	mu        sync.Mutex
	seen      map[string]bool // sender|i
	last      map[string]int  // sender -> highest i shown
	dups      int             // posts shown twice
	disorder  int             // posts shown after a later post of the same sender
	latencies []time.Duration // post to read
	lastRead  time.Time
}

func (r *reader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *reader) read(in *client.Incoming, now time.Time) {
	parts := strings.Split(in.Text(), "|") // sender|i|unix nanos
	if len(parts) != 3 {
		return
	}
	i, _ := strconv.Atoi(parts[1])
	ns, _ := strconv.ParseInt(parts[2], 10, 64)
	key := parts[0] + "|" + parts[1]
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastRead = now
	if r.seen[key] {
		r.dups++
		return
	}
	r.seen[key] = true
	if last, ok := r.last[parts[0]]; ok && i < last {
		r.disorder++
	}
	r.last[parts[0]] = max(r.last[parts[0]], i)
	r.latencies = append(r.latencies, now.Sub(time.Unix(0, ns)))
}

func TestLoad(t *testing.T) {
	if os.Getenv("COTAL_LOAD") == "" {
		t.Skip("the load test runs by hand: COTAL_LOAD=1 go test -run TestLoad ./bench/load/ -args -agents 20 -posts 20")
	}
	n, m := *agents, *posts
	mesh := meshtest.Start(t, sp)
	js := mesh.Provision(sp, provision.Options{}) // channels durable by default
	lane := &delivery.Lane{Space: sp, Server: mesh.URL, Logger: brokertest.Logger(t), Creds: mesh.Mint(sp, meshtest.DeliverySpec())}
	deliverytest.Serve(t, lane)

	eps := make([]*client.Endpoint, n)
	readers := make([]*reader, n)
	for i := range n {
		actor := fmt.Sprintf("a%04d", i)
		uid := fmt.Sprintf("%s%022d", actor, i)[:26]
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: actor}
		if _, err := provision.Agent(t.Context(), js, sp, p, uid, ""); err != nil {
			t.Fatal(err)
		}
		c, err := trust.ReadCreds(mesh.Mint(sp, trust.UserSpec{Name: actor, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid,
			AllowSubscribe: []string{channel}, AllowPublish: []string{channel}}))
		if err != nil {
			t.Fatal(err)
		}
		ep, err := client.Connect(t.Context(), mesh.URL, client.Config{Space: sp, Name: actor, LifecycleUID: c.LifecycleUID},
			nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		if err := ep.Join(t.Context(), channel); err != nil {
			t.Fatal(err)
		}
		if ok, why, _ := ep.Backstop(channel); !ok {
			t.Fatalf("%s: durable backstop not established: %s", actor, why)
		}
		eps[i], readers[i] = ep, &reader{seen: map[string]bool{}, last: map[string]int{}}
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			for {
				select {
				case in := <-ep.Messages():
					readers[i].read(in, time.Now())
					if err := in.Ack(); err != nil {
						t.Errorf("ack: %v", err)
					}
				case <-ctx.Done():
					return
				}
			}
		})
	}
	start := time.Now()
	var sends sync.WaitGroup
	for _, ep := range eps {
		sends.Go(func() {
			for j := range m {
				text := fmt.Sprintf("%s|%d|%d", ep.Principal().Actor, j, time.Now().UnixNano())
				if _, err := ep.Post(t.Context(), channel, client.Text(text)); err != nil {
					t.Errorf("post: %v", err)
					return
				}
			}
		})
	}
	sends.Wait()
	posted := time.Since(start)
	expected := n * (n - 1) * m
	total := func() int {
		s := 0
		for _, r := range readers {
			s += r.count()
		}
		return s
	}
	// Wait until everything is read (or nothing new comes for -stall), then for -quiet
	// of silence, so late copies shown again are counted.
	got, progress := total(), time.Now()
	for got < expected && time.Since(progress) < *stall {
		time.Sleep(200 * time.Millisecond)
		if now := total(); now != got {
			got, progress = now, time.Now()
		}
	}
	read := time.Since(start)
	for {
		var lastRead time.Time
		for _, r := range readers {
			r.mu.Lock()
			if r.lastRead.After(lastRead) {
				lastRead = r.lastRead
			}
			r.mu.Unlock()
		}
		if time.Since(lastRead) >= *quiet {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()

	var dups, disorder int
	var lat []time.Duration
	for _, r := range readers {
		r.mu.Lock()
		dups += r.dups
		disorder += r.disorder
		lat = append(lat, r.latencies...)
		r.mu.Unlock()
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))]
	}
	t.Logf("%d agents × %d posts, authenticated mesh, durable channel: delivered %d/%d (%.4f), duplicates shown %d, order violations %d, latency p50 %s p99 %s; posted in %s, read in %s (%.0f deliveries/s)",
		n, m, total(), expected, float64(total())/float64(expected), dups, disorder,
		pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), posted.Round(time.Millisecond), read.Round(time.Millisecond),
		float64(total())/read.Seconds())
	if total() != expected || dups != 0 || disorder != 0 {
		t.Errorf("want every post read once, in order: delivered %d/%d, %d duplicates, %d order violations", total(), expected, dups, disorder)
	}
}
