package broker_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cotal-ai/cotal/broker"
)

// lowerOpenFiles sets the process's soft open-file limit to soft for the test and
// restores the old limit after it.
func lowerOpenFiles(t *testing.T, soft uint64) syscall.Rlimit {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if soft > old.Max {
		t.Fatalf("soft limit %d above the hard limit %d", soft, old.Max)
	}
	low := old
	low.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	return old
}

func openFDs(t *testing.T) uint64 {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return uint64(len(es))
}

// Start takes the whole open-file limit the administrator allows, and says how many
// spaces it holds.
func TestStartRaisesOpenFileLimit(t *testing.T) {
	old := lowerOpenFiles(t, 1024)
	if old.Max <= 1024 {
		t.Skipf("hard open-file limit %d leaves nothing to raise", old.Max)
	}
	s := &broker.Server{Dir: t.TempDir(), Port: -1}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != old.Max {
		t.Fatalf("soft open-file limit after Start = %d, want the hard limit %d", now.Cur, old.Max)
	}
	c := s.Capacity()
	want := int((old.Max - broker.ReservedFiles) / broker.SpaceFiles)
	if c.OpenFiles != uint64(old.Max) || c.HardFiles != uint64(old.Max) || c.Spaces != want {
		t.Fatalf("Capacity() = %+v, want %d files and %d spaces", c, old.Max, want)
	}
}

// Room refuses streams the open-file limit cannot hold, naming the limit and the fix, and
// lets through what it can.
func TestRoomRefusesBeyondOpenFileLimit(t *testing.T) {
	s := &broker.Server{Dir: t.TempDir(), Port: -1}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Room for exactly one space's streams beside what is open now, and not two.
	open := openFDs(t)
	lowerOpenFiles(t, open+broker.ReservedFiles+broker.SpaceFiles+8)
	if err := s.Room(broker.SpaceStreams); err != nil {
		t.Fatalf("Room for one space: %v", err)
	}
	// The space let through counts as open until the next count of the open files.
	err := s.Room(broker.SpaceStreams)
	if !errors.Is(err, broker.ErrNoRoom) {
		t.Fatalf("Room for a second space = %v, want ErrNoRoom", err)
	}
	for _, want := range []string{"ulimit -n", "LimitNOFILE", "open-file limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// WaitRoom waits for open files to close (as block files close once idle) instead of
// refusing a space that fits a moment later; with nothing closing it refuses as Room does.
func TestWaitRoomWaitsForFilesToClose(t *testing.T) {
	s := &broker.Server{Dir: t.TempDir(), Port: -1}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	open := openFDs(t)
	lowerOpenFiles(t, open+broker.ReservedFiles+broker.SpaceFiles+8)
	// Files standing for block files still open: no room for a space while they are.
	var held []*os.File
	for range broker.SpaceFiles {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	if err := s.Room(broker.SpaceStreams); !errors.Is(err, broker.ErrNoRoom) {
		t.Fatalf("Room with the files held = %v, want ErrNoRoom", err)
	}
	for _, f := range held {
		f.Close()
	}
	// Room would refuse again until its next count; WaitRoom counts again and lets it in.
	if err := s.WaitRoom(t.Context(), broker.SpaceStreams); err != nil {
		t.Fatalf("WaitRoom once the files closed: %v", err)
	}
	// Files that stay open: waiting ends with Room's refusal.
	for range broker.SpaceFiles {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	err := s.WaitRoom(ctx, broker.SpaceStreams)
	if !errors.Is(err, broker.ErrNoRoom) || !strings.Contains(err.Error(), "ulimit -n") {
		t.Fatalf("WaitRoom with no room coming = %v, want ErrNoRoom naming the fix", err)
	}
}
