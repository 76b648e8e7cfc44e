package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data: it writes a temp file in the same folder, sets
// its mode to perm exactly (no umask), fsyncs and closes it (both checked), renames it over
// path and fsyncs the folder. A crash leaves the old content or the new, never half a file,
// and a failed write removes its temp file and leaves path as it was.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
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
	if err := syncDir(dir); err != nil {
		// The rename happened: path holds the new content, only its durability is unknown.
		return fmt.Errorf("write %s: sync folder: %w", path, err)
	}
	return nil
}
