package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// SpaceStreams is how many streams and buckets one space is: the footprint
// provision.Space creates (provision's tests keep the two equal).
const SpaceStreams = 24

// LaneConns is how many broker connections the lanes serving one space hold at most
// (its delivery lane and its auth-service lane, one each).
const LaneConns = 2

// SpaceFiles is how many open files one space costs the broker process: the file store
// keeps each stream's last message block open from the stream's creation (or its last
// write) until the block has been idle 30 s and the server's next sync pass (every
// SyncInterval) closes it, so a space being provisioned or written holds one file per
// stream, and each lane connection is a socket.
const SpaceFiles = SpaceStreams + LaneConns

// ReservedFiles are the open files kept back from the spaces: the broker's listeners,
// its store and resolver files, the process's own, and a margin for agents' connections
// and for spaces provisioned at the same instant as a Room check.
const ReservedFiles = 512

// ErrNoRoom reports that the broker process has no open files left for another space's
// streams: the file store would fail to create them (JetStream error 10049, "too many
// open files" in the broker's log). It is wrapped with the figures and the fix.
var ErrNoRoom = errors.New("no room for another space")

// Capacity is what the broker process can hold under its open-file limit.
type Capacity struct {
	OpenFiles uint64 // the soft open-file limit (RLIMIT_NOFILE) once raised to the hard one; 0 when unknown
	HardFiles uint64 // the hard open-file limit; only the administrator can raise it
	Spaces    int    // spaces whose streams and lane connections fit at once: (OpenFiles - ReservedFiles) / SpaceFiles; 0 when unknown
}

// CapacityFor is the capacity of a broker process under an open-file limit of soft
// (hard): what Start found, or what `cotal doctor` reads of a running broker.
func CapacityFor(soft, hard uint64) Capacity {
	c := Capacity{OpenFiles: soft, HardFiles: hard}
	if soft > ReservedFiles {
		c.Spaces = int((soft - ReservedFiles) / SpaceFiles)
	}
	return c
}

// Capacity is how many spaces this broker can hold under the process's open-file limit,
// as Start raised it; the zero Capacity before Start or where the limit is unknown.
func (s *Server) Capacity() Capacity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capacity
}

// Room returns nil when the broker process has open files left for that many more streams
// (and their lanes' connections) beyond those open now and ReservedFiles, and otherwise
// ErrNoRoom naming the limit and the fix. Call it before creating a space's streams
// (provision.Options.Room), so that a space that cannot be created is refused before
// anything of it exists. It reads the limit as it is now. Where the open files cannot be counted (no /proc) or the limit
// is unknown, it returns nil and the server alone judges.
func (s *Server) Room(streams int) error {
	soft, hard, err := openFileLimit()
	if err != nil || soft == 0 {
		return nil
	}
	open, ok := s.fdCount.estimate(time.Now())
	if !ok {
		return nil
	}
	need := uint64(open) + uint64(streams) + LaneConns + ReservedFiles
	if need <= soft {
		s.fdCount.admit(streams)
		return nil
	}
	return fmt.Errorf("broker: %w: %d streams need %d more open files and %d of the process's limit of %d are in use (each stream keeps its newest block file open; the broker keeps %d back): raise the open-file limit (ulimit -n, systemd LimitNOFILE; the hard limit is %d) to at least %d, or serve further spaces from another broker",
		ErrNoRoom, streams, uint64(streams)+LaneConns, open, soft, ReservedFiles, hard, need)
}

// blockIdleClose is how long nats-server's file store leaves a block file open after its
// last write (closeFDsIdle); the next sync pass, at most SyncInterval later, closes it.
const blockIdleClose = 30 * time.Second

// RoomWait is how long WaitRoom waits for room: the longest a block file written just
// before it stays open, and a margin for a late sync pass on a busy machine.
const RoomWait = blockIdleClose + SyncInterval + 15*time.Second

// WaitRoom is Room for a provisioner that may wait: while the broker has no room it
// counts the open files again every second, since the block files of the streams just
// created or written close once idle (provisioning hundreds of spaces a minute holds them
// all open at once), and it refuses only if there is still no room after RoomWait, or
// when ctx ends first, or at once when the limit is too low for the streams alone. The refusal is Room's, naming the limit and the fix.
func (s *Server) WaitRoom(ctx context.Context, streams int) error {
	err := s.Room(streams)
	if err == nil {
		return nil
	}
	if soft, _, lerr := openFileLimit(); lerr == nil && uint64(streams)+LaneConns+ReservedFiles > soft {
		return err // no file closing makes room under this limit
	}
	end := time.NewTimer(RoomWait)
	defer end.Stop()
	tick := time.NewTicker(recountEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return err
		case <-end.C:
			return s.Room(streams)
		case <-tick.C:
			if err = s.Room(streams); err == nil {
				return nil
			}
		}
	}
}

// recountEvery is how old a count of the open files Room may use: counting reads
// /proc/self/fd, whose cost grows with the files open (at 15 000 files, counting before
// every space took a tenth of a 2-core machine provisioning thousands of spaces).
const recountEvery = time.Second

// fdCounter is the open-file count Room judges by: a count of /proc/self/fd at most
// recountEvery old, plus the streams Room let through since, each counted as a file
// still open (a stream's block file stays open at least 30 s).
type fdCounter struct {
	mu      sync.Mutex
	at      time.Time // when counted; zero before the first count
	counted int
	since   int // streams let through since
}

// estimate returns the files open now as far as Room knows, counting again when the
// last count is older than recountEvery. False where the open files cannot be counted.
func (c *fdCounter) estimate(now time.Time) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || now.Sub(c.at) >= recountEvery || now.Before(c.at) {
		n, ok := openFiles()
		if !ok {
			return 0, false
		}
		c.at, c.counted, c.since = now, n, 0
	}
	return c.counted + c.since, true
}

// admit counts streams Room let through as open until the next count.
func (c *fdCounter) admit(streams int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since += streams
}

// openFiles counts the process's open file descriptors (Linux /proc/self/fd); false
// where they cannot be counted.
func openFiles() (int, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	return len(names) - 1, true // less the directory itself
}
