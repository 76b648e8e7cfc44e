// Package meshreg is the per-user registry of remote user-auth meshes: one JSON file per
// space, <dir>/<space>.json (0600, folder 0700, written atomically), recorded from the
// mesh's discovery bundle by `cotal meshes add <space> --from <public URL>`. The public
// URL a space was added from is pinned: adding the space again from another URL is refused
// until the entry is removed.
package meshreg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
)

// ErrNotFound is wrapped by Get and Remove when no entry is registered for the space.
var ErrNotFound = errors.New("mesh not registered")

// PinnedError is returned by Add when the space is registered from another public URL.
type PinnedError struct {
	Space  string
	Pinned string // the URL the entry was added from
	Given  string // the URL Add was asked to record
}

func (e *PinnedError) Error() string {
	return fmt.Sprintf("mesh %q is pinned to %s, not %s: remove it first (cotal meshes rm %s)", e.Space, e.Pinned, e.Given, e.Space)
}

// ExistsError is returned by Add when the space is registered from the same public URL
// with other settings and force is false.
type ExistsError struct {
	Space   string
	Changed []string // JSON names of the fields that differ
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("mesh %q is already registered with another %s", e.Space, strings.Join(e.Changed, ", "))
}

// Path returns the file of space's entry in dir: <dir>/<space>.json.
func Path(dir, space string) (string, error) {
	if err := protocol.CheckSpace(space); err != nil {
		return "", err
	}
	return filepath.Join(dir, space+".json"), nil
}

// Add records e in dir after checking it. An entry already registered for e.Space is
// kept (with its AddedAt) when only AddedAt differs; one from another ExchangeURL is
// refused with *PinnedError even with force; one with other settings is refused with
// *ExistsError unless force, which replaces it.
func Add(dir string, e Entry, force bool) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	}
	old, err := Get(dir, e.Space)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	case old.ExchangeURL != e.ExchangeURL:
		return &PinnedError{Space: e.Space, Pinned: old.ExchangeURL, Given: e.ExchangeURL}
	default:
		changed := old.diff(e)
		if len(changed) == 0 {
			return nil
		}
		if !force {
			return &ExistsError{Space: e.Space, Changed: changed}
		}
	}
	data, err := e.Encode()
	if err != nil {
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	}
	p, _ := Path(dir, e.Space) // the space was checked by Validate
	if err := atomicfile.WriteFile(p, data, 0o600); err != nil {
		return fmt.Errorf("add mesh %q: %w", e.Space, err)
	}
	return nil
}

// Get reads and checks the entry of space; it wraps ErrNotFound when there is none.
func Get(dir, space string) (Entry, error) {
	p, err := Path(dir, space)
	if err != nil {
		return Entry{}, fmt.Errorf("get mesh: %w", err)
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("get mesh %q: %w", space, ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("get mesh %q: %w", space, err)
	}
	e, err := Decode(data)
	if err != nil {
		return Entry{}, fmt.Errorf("mesh entry %s: %w", p, err)
	}
	if e.Space != space {
		return Entry{}, fmt.Errorf("mesh entry %s: records space %q, not %q", p, e.Space, space)
	}
	return e, nil
}

// List reads every entry in dir, sorted by space; a missing dir is an empty registry. A
// file that is not a valid entry fails the whole list, naming the file.
func List(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list meshes: %w", err)
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		space, ok := strings.CutSuffix(name, ".json")
		if !ok || strings.HasPrefix(name, ".") || de.IsDir() {
			continue // temp files of an atomic write, and anything else not ours
		}
		if protocol.CheckSpace(space) != nil {
			return nil, fmt.Errorf("list meshes: %s: %q is not a space name", filepath.Join(dir, name), space)
		}
		e, err := Get(dir, space)
		if err != nil {
			return nil, fmt.Errorf("list meshes: %w", err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Space < out[j].Space })
	return out, nil
}

// Remove deletes the entry of space, valid or not; it wraps ErrNotFound when there is none.
func Remove(dir, space string) error {
	p, err := Path(dir, space)
	if err != nil {
		return fmt.Errorf("remove mesh: %w", err)
	}
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove mesh %q: %w", space, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("remove mesh %q: %w", space, err)
	}
	return nil
}
