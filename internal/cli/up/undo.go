package up

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// before is what a project's control folder held when a run of up began, so that a run
// that fails (or is stopped) before its mesh serves can take away what it made: a new
// trust chain, a store, logs, the control folder itself.
type before struct {
	dir      string          // the control folder, <project>/.cotal
	existed  bool            // dir existed
	entries  map[string]bool // the names dir held
	store    string          // --store-dir ("" when none was given)
	hadStore bool            // the store folder existed
}

// snapshot records what dir (a project's .cotal) and store (--store-dir, or "") hold now.
func snapshot(dir, store string) *before {
	b := &before{dir: dir, entries: map[string]bool{}, store: store}
	if des, err := os.ReadDir(dir); err == nil {
		b.existed = true
		for _, de := range des {
			b.entries[de.Name()] = true
		}
	} else if _, err := os.Lstat(dir); err == nil {
		b.existed = true // a file where the folder would be: never touched
	}
	if store != "" {
		_, err := os.Lstat(store)
		b.hadStore = err == nil
	}
	return b
}

// undo removes what the run made since the snapshot: every entry of the control folder
// that was not there, the store folder when it was new, and the control folder when it was
// new and is left empty. The parent of a detached run (parentOnly) made only the log its
// background child writes to; the child takes away what it made itself, so the parent
// removes the log (and the control folder) only when nothing else new is left.
func (b *before) undo(parentOnly bool) error {
	des, err := os.ReadDir(b.dir)
	if err != nil {
		return nil // nothing there to take away
	}
	var made []string
	for _, de := range des {
		if !b.entries[de.Name()] {
			made = append(made, de.Name())
		}
	}
	if parentOnly && !slices.Equal(made, []string{"nats.log"}) && len(made) > 0 {
		return nil // the background child left a running or kept state: not the parent's
	}
	var errs []error
	for _, name := range made {
		if err := os.RemoveAll(filepath.Join(b.dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("take away %s: %w", filepath.Join(b.dir, name), err))
		}
	}
	if b.store != "" && !b.hadStore && !parentOnly {
		if err := os.RemoveAll(b.store); err != nil {
			errs = append(errs, fmt.Errorf("take away the store %s: %w", b.store, err))
		}
	}
	if !b.existed {
		if err := os.Remove(b.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("take away %s: %w", b.dir, err))
		}
	}
	return errors.Join(errs...)
}
