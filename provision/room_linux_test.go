package provision_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/broker"
	"github.com/cotal-ai/cotal/broker/brokertest"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
)

// A space the broker's open-file limit cannot hold is refused by Room before any of it
// exists; without Room the server fails part way (JetStream error 10049, "too many open
// files" in its log) and leaves the streams it made.
func TestSpaceRoomRefusesBeforeCreating(t *testing.T) {
	srv := brokertest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	// Open files for a few of the space's streams, not all of them: the server itself
	// would fail part way.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(es)) + 4
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })

	var asked int
	room := func(streams int) error { asked = streams; return srv.Room(streams) }
	_, err = provision.Space(t.Context(), js, "full", provision.Options{Room: room})
	if !errors.Is(err, broker.ErrNoRoom) {
		t.Fatalf("Space beyond the open-file limit = %v, want broker.ErrNoRoom", err)
	}
	if asked != broker.SpaceStreams {
		t.Errorf("Room asked for %d streams, want the whole footprint, %d", asked, broker.SpaceStreams)
	}
	if got := streamNames(t, js); len(got) != 0 {
		t.Fatalf("a refused space left streams: %v", got)
	}

	// With the limit back, the same space is created, and Room is not asked again for a
	// space that exists.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if _, err := provision.Space(t.Context(), js, "full", provision.Options{Room: room}); err != nil {
		t.Fatal(err)
	}
	if got := len(streamNames(t, js)); got != broker.SpaceStreams {
		t.Fatalf("space has %d streams and buckets, broker.SpaceStreams says %d", got, broker.SpaceStreams)
	}
	asked = 0
	if _, err := provision.Space(t.Context(), js, "full", provision.Options{Room: room}); err != nil {
		t.Fatal(err)
	}
	if asked != 0 {
		t.Fatalf("Room asked for %d streams of a space that exists", asked)
	}
}

// A space whose limits the broker cannot reserve has no JetStream at all: Space says so
// and what to do, rather than "no responders".
func TestSpaceWithoutJetStreamSaysWhy(t *testing.T) {
	chain := meshtest.Chain(t, "huge")
	l := trust.DefaultLimits()
	l.Storage = 1 << 60 // more disk than any broker has
	if _, _, err := chain.SetLimits("huge", l); err != nil {
		t.Fatal(err)
	}
	m := meshtest.Serve(t, chain)
	js := m.Provisioner("huge")
	_, err := provision.Space(t.Context(), js, "huge", provision.Options{})
	if !errors.Is(err, provision.ErrNoJetStream) {
		t.Fatalf("Space of an account without JetStream = %v, want ErrNoJetStream", err)
	}
	t.Log(err)
}
