package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// OutFile is a file the user named for a command to write (cotal mint --out FILE). Whatever
// is there already is never replaced unless Force (--force) says so.
type OutFile struct {
	Path  string
	Flag  string // the flag that named it, "--out"
	Force bool
	Next  string // the command to run instead: the same one with --force, or another path
	Retry string // the same command as given, to run again once its folder is made
}

// Check refuses, before any other work so that a refused run changes nothing: a Path
// that is a directory or anything but a regular file (even with Force), a Path whose folder
// does not exist or is not a folder (it is never created), and an existing Path without
// Force.
func (o OutFile) Check() error {
	dir := filepath.Dir(o.Path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return RefuseUsage(fmt.Sprintf("%s %s", o.Flag, o.Path), "the folder "+dir+" does not exist, and "+o.Flag+" creates no folder (nothing was written)",
			"mkdir -p "+ShellQuote(dir)+" && "+o.Retry)
	case err != nil:
		return fmt.Errorf("%s %s: %w", o.Flag, o.Path, err)
	case !fi.IsDir():
		return RefuseUsage(fmt.Sprintf("%s %s", o.Flag, o.Path), dir+" is not a folder (nothing was written)", "")
	}
	fi, err = os.Lstat(o.Path)
	switch {
	case err == nil && fi.IsDir():
		return RefuseUsage(fmt.Sprintf("%s %s", o.Flag, o.Path), "it is a folder; "+o.Flag+" names the file to write (nothing was written)",
			"")
	case err == nil && !fi.Mode().IsRegular():
		return RefuseUsage(fmt.Sprintf("%s %s", o.Flag, o.Path), "it is not a regular file (a device, pipe, socket or link), which "+o.Flag+" never replaces, even with --force (nothing was written)",
			"")
	case err == nil && !o.Force:
		return o.exists()
	case err != nil && !errors.Is(err, fs.ErrNotExist):
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
