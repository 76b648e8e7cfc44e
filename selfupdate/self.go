package selfupdate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// ErrBadBinary reports a new binary that does not run.
var ErrBadBinary = errors.New("the new binary does not run")

// selfCheckTimeout bounds `<new binary> --version`.
const selfCheckTimeout = 30 * time.Second

// ReplaceSelf replaces the binary at target with the one at from: it first checks that
// from runs (`from --version` exits 0; otherwise the error wraps ErrBadBinary and nothing
// changed), then copies it to a temp file in target's folder with target's mode, fsyncs it
// and renames it over target. It returns the first line the new binary printed.
func ReplaceSelf(ctx context.Context, from, target string) (version string, err error) {
	fi, err := os.Stat(from)
	if err != nil {
		return "", fmt.Errorf("new binary: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("new binary %s: not a regular file", from)
	}
	tfi, err := os.Stat(target)
	if err != nil {
		return "", fmt.Errorf("installed binary: %w", err)
	}
	if os.SameFile(fi, tfi) {
		return "", fmt.Errorf("new binary %s is the installed one", from)
	}
	version, err = probe(ctx, from)
	if err != nil {
		return "", err
	}
	in, err := os.Open(from)
	if err != nil {
		return "", fmt.Errorf("new binary: %w", err)
	}
	defer in.Close()
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".update-*")
	if err != nil {
		return "", fmt.Errorf("replace %s: %w", target, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close() // already failing
			if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temp file: %w", rmErr))
			}
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return "", fmt.Errorf("replace %s: copy: %w", target, err)
	}
	if err := tmp.Chmod(tfi.Mode().Perm()); err != nil {
		return "", fmt.Errorf("replace %s: set mode: %w", target, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("replace %s: sync: %w", target, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("replace %s: close: %w", target, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", fmt.Errorf("replace %s: rename: %w", target, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return version, fmt.Errorf("replace %s: replaced, but sync folder: %w", target, err)
	}
	return version, nil
}

// probe runs `exe --version` and returns its first line.
func probe(ctx context.Context, exe string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, selfCheckTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "--version")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg != "" {
			return "", fmt.Errorf("%w: %s --version: %w: %s", ErrBadBinary, exe, err, msg)
		}
		return "", fmt.Errorf("%w: %s --version: %w", ErrBadBinary, exe, err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	return first, nil
}
