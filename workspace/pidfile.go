package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// ErrNoPidfile reports that no pidfile is recorded at a path.
var ErrNoPidfile = errors.New("no pidfile")

// errProcessGone is returned by processStart for a pid with no running process.
var errProcessGone = errors.New("process not running")

// Record is what a pidfile pins: a daemon's pid and the start time of that process.
//
// Start is the process start in clock ticks since boot (/proc/<pid>/stat field 22) on Linux,
// so a pid the kernel handed to another process is never mistaken for the daemon. On other
// systems Start is empty and the guard is weaker: Alive then only asks whether some process
// has the pid, and a reused pid reads as alive.
type Record struct {
	PID   int    `json:"pid"`
	Start string `json:"start"`
}

// identityPath names the identity file that pins the pidfile at path.
func identityPath(path string) string { return path + ".identity" }

// WritePidfile records pid at path: path.identity gets the JSON Record (pid and start time
// of the running process pid) and path gets the pid and a newline, each written atomically,
// mode 0600. The identity is written first, so a crash in between leaves no pidfile rather
// than a pid without its pin. pid must name a running process.
func WritePidfile(path string, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("write pidfile %s: pid %d is not a process id", path, pid)
	}
	start, err := processStart(pid)
	if err != nil {
		return fmt.Errorf("write pidfile %s: process %d: %w", path, pid, err)
	}
	id, err := json.Marshal(Record{PID: pid, Start: start})
	if err != nil {
		return fmt.Errorf("write pidfile %s: encode identity: %w", path, err)
	}
	if err := atomicfile.WriteFile(identityPath(path), append(id, '\n'), 0o600); err != nil {
		return fmt.Errorf("write pidfile identity: %w", err)
	}
	if err := atomicfile.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pidfile: %w", err)
	}
	return nil
}

// ReadPidfile reads the pidfile at path and its identity. It wraps ErrNoPidfile when the
// pidfile is absent (an identity left alone is what a crash between the two writes or the
// two removals leaves, so it counts as absent too). A pidfile whose identity is missing,
// unreadable or names another pid is torn: that is an error saying so, never a guess.
func ReadPidfile(path string) (Record, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("%w at %s", ErrNoPidfile, path)
	}
	if err != nil {
		return Record{}, fmt.Errorf("read pidfile: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return Record{}, fmt.Errorf("pidfile %s: %q is not a process id", path, strings.TrimSpace(string(raw)))
	}
	idPath := identityPath(path)
	idRaw, err := os.ReadFile(idPath)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("pidfile %s is torn: pid %d has no identity file %s; remove the pidfile once no such daemon runs", path, pid, idPath)
	}
	if err != nil {
		return Record{}, fmt.Errorf("read pidfile identity: %w", err)
	}
	var r Record
	if err := json.Unmarshal(idRaw, &r); err != nil {
		return Record{}, fmt.Errorf("pidfile %s is torn: identity %s: decode JSON: %w", path, idPath, err)
	}
	if r.PID != pid {
		return Record{}, fmt.Errorf("pidfile %s is torn: it names pid %d but identity %s names pid %d", path, pid, idPath, r.PID)
	}
	return r, nil
}

// Alive reports whether the process r pins still runs: a process with r.PID exists, is not
// a zombie, and started at r.Start. A pid now held by another process reports false (on
// Linux; see Record for other systems).
func (r Record) Alive() (bool, error) {
	if r.PID <= 0 {
		return false, fmt.Errorf("check process %d: not a process id", r.PID)
	}
	start, err := processStart(r.PID)
	if errors.Is(err, errProcessGone) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check process %d: %w", r.PID, err)
	}
	return start == r.Start, nil
}

// RemovePidfile removes the pidfile at path and then its identity; files already gone are
// not an error.
func RemovePidfile(path string) error {
	for _, p := range []string{path, identityPath(path)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove pidfile: %w", err)
		}
	}
	return nil
}

// ProcessRecord is the identity of the live process pid now: its pid and start time, to
// check later with Alive.
func ProcessRecord(pid int) (Record, error) {
	start, err := processStart(pid)
	if err != nil {
		return Record{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return Record{PID: pid, Start: start}, nil
}
