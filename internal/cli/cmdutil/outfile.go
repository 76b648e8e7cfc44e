package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// OutFile is a file the user named for a command to write (cotal mint --out FILE). Whatever
// is there already is never replaced unless Force (--force) says so.
type OutFile struct {
	Path  string
	Flag  string // the flag that named it, "--out"
	Force bool
	Next  string // the command to run instead: the same one with --force, or another path
}

// Check refuses an existing Path without Force. Commands call it before any other work,
// so a refused run changes nothing.
func (o OutFile) Check() error {
	if o.Force {
		return nil
	}
	if _, err := os.Lstat(o.Path); err == nil {
		return o.exists()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", o.Flag, o.Path, err)
	}
	return nil
}

// Write writes data to Path with mode perm, atomically: with Force it replaces what is
// there, otherwise it creates Path and refuses when it appeared since Check.
func (o OutFile) Write(data []byte, perm os.FileMode) error {
	if o.Force {
		return atomicfile.WriteFile(o.Path, data, perm)
	}
	err := atomicfile.CreateFile(o.Path, data, perm)
	if errors.Is(err, fs.ErrExist) {
		return o.exists()
	}
	return err
}

func (o OutFile) exists() error {
	return Refuse(fmt.Sprintf("%s %s", o.Flag, o.Path), "the file exists, and "+o.Flag+" never replaces a file without --force", o.Next)
}
