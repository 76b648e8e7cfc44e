package web_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/protocol"
)

// BenchmarkFeed: 50 peers post b.N messages in all; it reports the rate at which the
// dashboard's SSE feed delivers them as a ratio of the rate a raw nats.go subscriber on
// the same server receives them in the same run (1.0: the feed keeps up with the mesh).
func BenchmarkFeed(b *testing.B) {
	url := openMesh(b)
	base := startWeb(b, url)
	peers := make([]*client.Endpoint, 50)
	for i := range peers {
		ep, err := client.Connect(b.Context(), url, client.Config{Space: space, Name: "p" + strconv.Itoa(i), Logger: brokertest.Logger(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = ep.Close() })
		peers[i] = ep
	}
	raw, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	meshDone := make(chan time.Time, 1)
	var seen int
	sub, err := raw.Subscribe(protocol.ChatAll(space), func(*nats.Msg) {
		if seen++; seen == b.N {
			meshDone <- time.Now()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := raw.Flush(); err != nil {
		b.Fatal(err)
	}
	feed := openFeed(b, base, "")
	next(b, feed, "snapshot")

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, ep := range peers {
		n := b.N / len(peers)
		if i < b.N%len(peers) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				m := ep.Envelope(client.Text("bench " + strconv.Itoa(j)))
				m.Channel = "bench"
				if _, err := ep.PublishAsync(protocol.ChatSubject(space, ep.Principal(), "bench"), m); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Read as a browser does: a feed that drops a slow reader is resumed with Last-Event-ID.
	resumes, last := 0, ""
	for got := 0; got < b.N; {
		var ev sseEvent
		ok := true
		select {
		case ev, ok = <-feed:
		case <-time.After(30 * time.Second): // a hang guard only
			b.Fatalf("the feed stalled after %s", last)
		}
		switch {
		case !ok:
			resumes++
			feed = openFeed(b, base, last)
		case ev.typ == "reset":
			b.Fatalf("the feed lost events after %s", last)
		case ev.typ == "message":
			got++
			last = ev.id
		}
	}
	b.ReportMetric(float64(resumes), "resumes")
	sseEnd := time.Now()
	meshEnd := <-meshDone
	b.StopTimer()
	meshRate := float64(b.N) / meshEnd.Sub(start).Seconds()
	sseRate := float64(b.N) / sseEnd.Sub(start).Seconds()
	b.ReportMetric(sseRate/meshRate, "sse/mesh")
}
