package meshview_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/cotal-ai/cotal/meshview"
	"github.com/cotal-ai/cotal/protocol"
)

// feed applies n channel posts spread over 10 channels and 50 senders.
func feed(m *meshview.Model, from, n int) {
	for i := from; i < from+n; i++ {
		sender := protocol.Principal{Owner: "local", Actor: "p" + strconv.Itoa(i%50)}
		ch := "c" + strconv.Itoa(i%10)
		m.ApplyMessage(protocol.Received{Kind: protocol.DeliveryChannel,
			Subject: protocol.Subject{Kind: protocol.KindChat, Sender: sender, Channel: ch},
			Message: protocol.Message{ID: "m" + strconv.Itoa(i), From: protocol.EndpointRef{ID: sender.String(), Name: sender.Actor},
				Channel: ch, Parts: []protocol.Part{protocol.TextPart("a message of some sixty bytes, give or take a few more")}}})
	}
}

func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryIsBounded: 100 000 messages hold no more than 10 000 do (every channel, the
// event log and the dedupe ring are bounded), within 25%.
func TestMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 100 000 messages")
	}
	base := heap()
	m := meshview.New(meshview.Config{})
	feed(m, 0, 10_000)
	at10k := heap() - base
	feed(m, 10_000, 90_000)
	at100k := heap() - base
	for _, c := range m.Channels() {
		if h, _ := m.History(c.Name, 0); len(h) != meshview.DefaultChannelDepth || c.Messages != 10_000 {
			t.Fatalf("channel %s holds %d (want %d) of %d", c.Name, len(h), meshview.DefaultChannelDepth, c.Messages)
		}
	}
	t.Logf("heap after 10k: %d KiB, after 100k: %d KiB (ratio %.2f)", at10k>>10, at100k>>10, float64(at100k)/float64(at10k))
	if float64(at100k) > 1.25*float64(at10k)+512<<10 { // slack for the runtime's own allocations
		t.Fatalf("heap grew from %d KiB at 10k messages to %d KiB at 100k: not bounded", at10k>>10, at100k>>10)
	}
	runtime.KeepAlive(m)
}

// BenchmarkModelMemory reports the heap a model holds after 100 000 messages as a ratio
// of what it holds after 10 000 (1.0 means bounded).
func BenchmarkModelMemory(b *testing.B) {
	for b.Loop() {
		base := heap()
		m := meshview.New(meshview.Config{})
		feed(m, 0, 10_000)
		at10k := heap() - base
		feed(m, 10_000, 90_000)
		at100k := heap() - base
		b.ReportMetric(float64(at100k)/float64(at10k), "heap100k/heap10k")
		b.ReportMetric(float64(at100k)/(1<<20), "MiB@100k")
		runtime.KeepAlive(m)
	}
}
