package brokercmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/workspace"
)

// findProject is the project whose trust chain a broker command (cmd, "cotal broker
// export") works on: the nearest .cotal/ above the current folder. Outside any project it
// refuses, naming where it looked, rather than make a new chain no one asked for there.
func findProject(getwd func() (string, error), getenv func(string) string, cmd string) (*workspace.Project, error) {
	wd, err := getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, getenv)
	if errors.Is(err, workspace.ErrNoProject) {
		if err := cmdutil.CheckProjectFolder(wd, getenv, cmd, cmd); err != nil {
			return nil, err
		}
		return nil, cmdutil.Refuse(cmd+" outside a project",
			"no project (a folder holding .cotal/) was found in "+wd+" or above it, so there is no trust chain to work on; "+
				"run it in the project folder of the mesh, or make this folder a project and run it again (nothing was written)",
			"mkdir -m 700 .cotal")
	}
	return proj, err
}

// checkOutDir refuses an output file whose folder does not exist or is not a folder (it is
// never created), and one that is a folder or not a regular file; the check comes before
// any other work.
func checkOutDir(flag, path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cmdutil.RefuseUsage(flag+" "+path, "the folder "+dir+" does not exist, and it is never created (nothing was written)",
			"mkdir -p "+cmdutil.ShellQuote(dir))
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !fi.IsDir():
		return cmdutil.RefuseUsage(flag+" "+path, dir+" is not a folder (nothing was written)", "")
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return cmdutil.RefuseUsage(flag+" "+path, "it is a folder; name the file to write (nothing was written)", "")
	} else if err == nil && !fi.Mode().IsRegular() {
		return cmdutil.RefuseUsage(flag+" "+path, "it is not a regular file (a device, pipe, socket or link), which is never replaced (nothing was written)", "")
	}
	return nil
}
