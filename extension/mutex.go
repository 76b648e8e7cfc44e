package extension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/filelock"
)

// LockFDEnv names the environment variable through which a process that holds the
// advisory lock lends it to a child: the child finds the lock file open at that file
// descriptor (3 for the first of exec.Cmd.ExtraFiles) and works under its parent's lock.
const LockFDEnv = "COTAL_EXT_LOCK_FD"

// ErrBusy reports that another process held the advisory lock for longer than the wait.
var ErrBusy = errors.New("another cotal process is changing the extensions")

// Guard is a held advisory lock on one prefix. Every change to the prefix takes one.
type Guard struct {
	f        *os.File
	dir      string
	borrowed bool
}

// File returns the open lock file, to hand to a child in exec.Cmd.ExtraFiles together
// with LockFDEnv.
func (g *Guard) File() *os.File { return g.f }

// Release lets go of the lock. A borrowed lock stays held by the parent that lent it.
func (g *Guard) Release() error {
	if g == nil || g.f == nil {
		return nil
	}
	f := g.f
	g.f = nil
	if !g.borrowed {
		if err := filelock.Unlock(f); err != nil {
			_ = f.Close() // closing releases the lock too; the unlock error is the one to report
			return fmt.Errorf("release extensions lock: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("release extensions lock: close: %w", err)
	}
	return nil
}

// owns checks that g holds this prefix's lock.
func (p *Prefix) owns(g *Guard) error {
	if g == nil || g.f == nil {
		return errors.New("extensions prefix: change without holding its lock")
	}
	if g.dir != p.Dir {
		return fmt.Errorf("extensions prefix %s: the lock held is for %s", p.Dir, g.dir)
	}
	return nil
}

// Lock takes the advisory lock of the prefix, creating the prefix (0700) when missing. It
// waits while another process holds it, until ctx ends or LockWait passes; then it returns
// an error wrapping ErrBusy that names the holder's pid.
func (p *Prefix) Lock(ctx context.Context) (*Guard, error) {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("extensions prefix: %w", err)
	}
	f, err := os.OpenFile(p.MutexPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("extensions lock: %w", err)
	}
	wait := p.LockWait
	if wait <= 0 {
		wait = time.Minute
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	backoff := 2 * time.Millisecond
	for {
		ok, err := filelock.TryLock(f)
		if err != nil {
			_ = f.Close() // the lock error is the one to report
			return nil, fmt.Errorf("extensions lock %s: %w", p.MutexPath(), err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("extensions lock %s: %w", p.MutexPath(), ctx.Err())
		case <-deadline.C:
			holder := readHolder(f)
			_ = f.Close()
			return nil, fmt.Errorf("%w (pid %s holds %s)", ErrBusy, holder, p.MutexPath())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
	// Record the holder for a process that waits in vain; the pid is advice, the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // advice only: a failed write loses the hint, not the lock
	}
	return &Guard{f: f, dir: p.Dir}, nil
}

// Borrow takes the lock a parent process lends through file descriptor fd (see
// LockFDEnv). It checks that fd is this prefix's lock file and that the lock is held
// through it; the parent keeps holding the lock after the child releases its guard. Borrow
// owns fd from then on: it is closed on error, and by Release.
func (p *Prefix) Borrow(fd uintptr) (g *Guard, err error) {
	f := os.NewFile(fd, "inherited extensions lock")
	if f == nil {
		return nil, fmt.Errorf("borrow extensions lock: fd %d is not open", fd)
	}
	defer func() {
		if err != nil {
			_ = f.Close() // already failing; fd is ours to close
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("borrow extensions lock: fd %d: %w", fd, err)
	}
	want, err := os.Stat(p.MutexPath())
	if err != nil {
		return nil, fmt.Errorf("borrow extensions lock: %w", err)
	}
	if !os.SameFile(fi, want) {
		return nil, fmt.Errorf("borrow extensions lock: fd %d is not %s", fd, p.MutexPath())
	}
	ok, err := filelock.TryLock(f)
	if err != nil {
		return nil, fmt.Errorf("borrow extensions lock: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("borrow extensions lock: fd %d does not hold %s", fd, p.MutexPath())
	}
	return &Guard{f: f, dir: p.Dir, borrowed: true}, nil
}

// Acquire borrows the lock when getenv(LockFDEnv) names a descriptor, and takes it
// otherwise.
func (p *Prefix) Acquire(ctx context.Context, getenv func(string) string) (*Guard, error) {
	v := getenv(LockFDEnv)
	if v == "" {
		return p.Lock(ctx)
	}
	fd, err := strconv.ParseUint(v, 10, 31)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("borrow extensions lock: %s=%q is not an inherited file descriptor", LockFDEnv, v)
	}
	return p.Borrow(uintptr(fd))
}

// readHolder returns the pid the holder wrote, or "unknown".
func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0) // io.EOF with n > 0 is the normal end of a short file
	if s := strings.TrimSpace(string(buf[:n])); s != "" {
		return s
	}
	return "unknown"
}
