package bearer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/workspace"
)

// File and folder modes of the key folder: secrets are readable by their owner only.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// fileVersion is the format version written into every key file.
const fileVersion = 1

// ErrCorrupt is wrapped by every error about a key file that exists but cannot be used.
// Nothing is regenerated over such a file: a new issuer key would void every bearer, and a
// new owner secret would re-key every owner.
var ErrCorrupt = errors.New("corrupt key file")

// loadOrCreate decodes the JSON file at path into v. When the file is missing it calls
// fresh for a new value and creates the file with it, create-only: when two processes
// race, both end up reading the one that won. check validates what was read.
func loadOrCreate(path string, v any, fresh func() (any, error), check func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return fmt.Errorf("create folder of %s: %w", path, err)
	}
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			if err := json.Unmarshal(b, v); err != nil {
				return fmt.Errorf("%w %s: %v; move it aside only if no bearer or owner depends on it", ErrCorrupt, path, err)
			}
			if err := check(); err != nil {
				return fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		nv, err := fresh()
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		if err := createFile(path, nv); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Created, or lost a race to another creator: read back what is there.
	}
	return fmt.Errorf("read %s: file vanished while being created", path)
}

// createFile writes v as JSON to path only if nothing is there yet: a 0600 temp file,
// fsynced, hard-linked into place (atomic, fails with fs.ErrExist when path exists).
func createFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return workspace.CreateFileAtomic(path, append(b, '\n'), fileMode)
}
