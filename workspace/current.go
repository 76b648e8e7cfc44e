package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
)

// CurrentMeshFile is the file in the machine home (MachineHome) naming the default space
// `cotal use` set: the space name and a newline, as the reference's ~/.cotal/current-mesh.
const CurrentMeshFile = "current-mesh"

// maxCurrentMesh bounds what ReadCurrentSpace reads: a space name and a newline.
const maxCurrentMesh = 1 << 10

// ReadCurrentSpace returns the default space recorded in home's CurrentMeshFile, or ""
// when none is recorded. A file that holds no valid space name is an error naming it.
func ReadCurrentSpace(home string) (string, error) {
	path := filepath.Join(home, CurrentMeshFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("default space: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCurrentMesh+1))
	if err != nil {
		return "", fmt.Errorf("default space %s: %w", path, err)
	}
	if len(b) > maxCurrentMesh {
		return "", fmt.Errorf("default space %s: longer than %d bytes; run `cotal use --clear`", path, maxCurrentMesh)
	}
	space := strings.TrimSpace(string(b))
	if err := protocol.CheckSpace(space); err != nil {
		return "", fmt.Errorf("default space %s: %w; run `cotal use --clear`", path, err)
	}
	return space, nil
}

// WriteCurrentSpace records space as home's default space, atomically, mode 0600 (home
// is made 0700 when missing).
func WriteCurrentSpace(home, space string) error {
	if err := protocol.CheckSpace(space); err != nil {
		return fmt.Errorf("default space: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("default space: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(home, CurrentMeshFile), []byte(space+"\n"), 0o600)
}

// ClearCurrentSpace removes home's default space; none recorded is not an error.
func ClearCurrentSpace(home string) error {
	if err := os.Remove(filepath.Join(home, CurrentMeshFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("default space: %w", err)
	}
	return nil
}
