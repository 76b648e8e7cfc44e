// Package atomicfile writes files so that a crash leaves the old content or the new, never
// half of one: temp file in the same folder, exact mode, fsync, rename (or hard link for a
// create that must not replace), fsync of the folder. It is on the ground floor: it imports
// nothing of this module, and every package that keeps state on disk writes through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data: it writes a temp file in the same folder, sets
// its mode to perm exactly (no umask), fsyncs and closes it (both checked), renames it over
// path and fsyncs the folder. A crash leaves the old content or the new, never half a file,
// and a failed write removes its temp file and leaves path as it was.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temp file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close() // already failing; a second close error adds nothing
			if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temp file: %w", rmErr))
			}
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: set mode: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: rename temp file: %w", path, err)
	}
	if err := SyncDir(dir); err != nil {
		// The rename happened: path holds the new content, only its durability is unknown.
		return fmt.Errorf("write %s: sync folder: %w", path, err)
	}
	return nil
}

// CreateFile creates path with data, never replacing anything: it writes a temp file
// (mode perm exactly), fsyncs and closes it, and hard-links it to path, which is atomic and
// fails when path exists (the error wraps fs.ErrExist), so two processes creating one file
// both end up with the one that won. Where links are not supported it falls back to a
// rename after checking that path is absent.
func CreateFile(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create %s: temp file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove temp file: %w", rmErr))
		}
	}()
	if err := f.Chmod(perm); err != nil {
		_ = f.Close() // already failing
		return fmt.Errorf("create %s: set mode: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // already failing
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // already failing
		return fmt.Errorf("create %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: close: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
		if _, statErr := os.Lstat(path); statErr == nil {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("create %s: sync folder: %w", path, err)
	}
	return nil
}
