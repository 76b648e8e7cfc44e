package cmdutil

import (
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/workspace"
)

// CheckProjectFolder refuses to make wd a new project when its .cotal/ would be the
// machine home (~/.cotal, or $COTAL_HOME): that folder holds the mesh registry of every
// project, and no command finds a project there, so a mesh or trust chain made in it
// would be lost to them. what names the refused step ("cotal up"); then is the command to
// run in a project folder instead, which the next line runs in a new folder under wd.
func CheckProjectFolder(wd string, getenv func(string) string, what, then string) error {
	home, err := workspace.MachineHome(getenv)
	if err != nil {
		return nil // no machine home can be named, so none can be taken for a project
	}
	here := filepath.Join(wd, workspace.ControlDir)
	if !sameDir(here, home) {
		return nil
	}
	dir := filepath.Join(wd, "cotal-project")
	return Refuse(what+" in "+wd,
		here+" is this machine's cotal folder (the mesh registry), not a project; "+
			"a project is a folder of its own, whose .cotal/ its commands find (nothing was written)",
		"mkdir -p "+ShellQuote(dir)+" && cd "+ShellQuote(dir)+" && "+then)
}

// sameDir reports whether a and b name the same folder: the same file when both exist,
// else the same cleaned absolute path.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// NewProjectNext is the next line of a command refused outside a project: it makes the
// folder cotal-project under wd a project (cotal setup --yes seeds its .cotal/, and works
// in the home folder too, where wd's own .cotal/ would be the machine home) and runs then
// there, when then is not "".
func NewProjectNext(wd, then string) string {
	dir := ShellQuote(filepath.Join(wd, "cotal-project"))
	next := "mkdir -p " + dir + " && cd " + dir + " && cotal setup --yes"
	if then != "" {
		next += " && " + then
	}
	return next
}
