package extension

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// Names inside the extensions prefix.
const (
	LockfileName = "extensions.lock"  // the lock: what is installed
	MutexName    = ".mutation.flock"  // the advisory lock file
	StoreDir     = "store"            // installed executables, store/<sha256>/cotal-<name>
	ExecPrefix   = "cotal-"           // an extension named n is the executable cotal-n
	tempPrefix   = ".tmp-"            // staged files and build folders
	lockFormat   = 1                  // Lockfile.Format written by this build
	lockfileMode = os.FileMode(0o600) // the lock holds paths and hashes, nothing secret, but is ours
)

// Lockfile is what extensions.lock records.
type Lockfile struct {
	Format     int      `json:"format"`     // 1
	Extensions []Record `json:"extensions"` // sorted by name
}

// Record is one installed extension.
type Record struct {
	Name        string    `json:"name"`        // cotal <name> runs it
	Version     string    `json:"version"`     // what the executable answered to --version at install
	Spec        string    `json:"spec"`        // absolute local path, or module path@version
	SHA256      string    `json:"sha256"`      // lowercase hex of the installed file
	FirstParty  bool      `json:"firstParty"`  // see the package comment
	File        string    `json:"file"`        // the executable, relative to the prefix, slash separated
	InstalledAt time.Time `json:"installedAt"` // UTC
}

// Find returns the record named name.
func (l *Lockfile) Find(name string) (Record, bool) {
	for _, r := range l.Extensions {
		if r.Name == name {
			return r, true
		}
	}
	return Record{}, false
}

// put adds rec or replaces the record of the same name, keeping the list sorted.
func (l *Lockfile) put(rec Record) {
	l.remove(rec.Name)
	l.Extensions = append(l.Extensions, rec)
	slices.SortFunc(l.Extensions, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
}

// remove drops the record named name and reports whether there was one.
func (l *Lockfile) remove(name string) bool {
	n := len(l.Extensions)
	l.Extensions = slices.DeleteFunc(l.Extensions, func(r Record) bool { return r.Name == name })
	return len(l.Extensions) != n
}

// Prefix is the extensions prefix. Set fields before the first method call.
type Prefix struct {
	Dir      string        // the prefix folder, $XDG_CONFIG_HOME/cotal/extensions; required
	Logger   *slog.Logger  // nil means discard
	LockWait time.Duration // how long Lock waits for another holder; 0 means one minute
	GoCmd    string        // the go command for module specs; "" means "go" from PATH
	Env      []string      // environment of the processes it runs; nil means os.Environ()
}

// LockfilePath returns <prefix>/extensions.lock.
func (p *Prefix) LockfilePath() string { return filepath.Join(p.Dir, LockfileName) }

// MutexPath returns <prefix>/.mutation.flock.
func (p *Prefix) MutexPath() string { return filepath.Join(p.Dir, MutexName) }

// Path returns the absolute path of rec's executable.
func (p *Prefix) Path(rec Record) string { return filepath.Join(p.Dir, filepath.FromSlash(rec.File)) }

// ReadLockfile reads the lock without taking the advisory lock: the lock is replaced
// atomically, so a reader sees one whole version. A missing lock (or prefix) is an empty
// lock. A lock that does not decode, or that a newer cotal wrote, is an error that names it.
func (p *Prefix) ReadLockfile() (*Lockfile, error) {
	raw, err := os.ReadFile(p.LockfilePath())
	if errors.Is(err, fs.ErrNotExist) {
		return &Lockfile{Format: lockFormat}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read extensions lock: %w", err)
	}
	var l Lockfile
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("extensions lock %s: decode: %w", p.LockfilePath(), err)
	}
	if l.Format > lockFormat {
		return nil, fmt.Errorf("extensions lock %s: format %d was written by a newer cotal (this one reads format %d)", p.LockfilePath(), l.Format, lockFormat)
	}
	for _, r := range l.Extensions {
		if err := checkRecord(r); err != nil {
			return nil, fmt.Errorf("extensions lock %s: %w", p.LockfilePath(), err)
		}
	}
	l.Format = lockFormat
	return &l, nil
}

// checkRecord rejects a record whose name or file could point outside the prefix.
func checkRecord(r Record) error {
	if err := ValidName(r.Name); err != nil {
		return fmt.Errorf("record %q: %w", r.Name, err)
	}
	want := StoreDir + "/" + r.SHA256 + "/" + ExecPrefix + r.Name
	if !isHexSHA256(r.SHA256) || r.File != want {
		return fmt.Errorf("record %q: file %q is not %s/<sha256>/%s%s", r.Name, r.File, StoreDir, ExecPrefix, r.Name)
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// writeLockfile replaces the lock atomically; g must hold the advisory lock.
func (p *Prefix) writeLockfile(g *Guard, l *Lockfile) error {
	if err := p.owns(g); err != nil {
		return err
	}
	l.Format = lockFormat
	if l.Extensions == nil {
		l.Extensions = []Record{}
	}
	raw, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("encode extensions lock: %w", err)
	}
	if err := atomicfile.WriteFile(p.LockfilePath(), append(raw, '\n'), lockfileMode); err != nil {
		return fmt.Errorf("extensions lock: %w", err)
	}
	return nil
}

func (p *Prefix) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

func (p *Prefix) env() []string {
	if p.Env == nil {
		return os.Environ()
	}
	return p.Env
}
