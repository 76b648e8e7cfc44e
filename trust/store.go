package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// File and folder modes of the trust folder: secrets are readable by their owner only.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// fileVersion is the format version written into every trust file.
const fileVersion = 1

// ErrCorrupt is wrapped by every error about a trust file that exists but cannot be used:
// unreadable JSON, a bad seed, a JWT that does not match its keys, or a missing broker.json
// next to existing account files. Nothing is regenerated over such a file.
var ErrCorrupt = errors.New("corrupt trust file")

// errExists reports that createFile lost to a file already at the path.
var errExists = errors.New("file exists")

// readFile decodes the JSON trust file at path into v. A missing file is reported as
// fs.ErrNotExist; one that does not decode wraps ErrCorrupt and ends with repair, the
// sentence saying how to fix it.
func readFile(path string, v any, repair string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return corrupt(path, err.Error(), repair)
	}
	return nil
}

// corrupt reports a trust file that exists but cannot be used: which file, what is wrong
// with it and how to repair it.
func corrupt(path, what, repair string) error {
	return fmt.Errorf("%w %s: %s; %s", ErrCorrupt, path, what, repair)
}

// createFile writes v as JSON to path only if nothing is there yet. The file is written
// to a temp file (mode 0600, fsynced) and hard-linked into place, which is atomic and
// fails when path exists; so two processes creating the same file at once both end up
// with the one that won, never a mix. It returns errExists when path was already there.
func createFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	err = atomicfile.CreateFile(path, append(b, '\n'), fileMode)
	if errors.Is(err, fs.ErrExist) {
		return errExists
	}
	return err
}
