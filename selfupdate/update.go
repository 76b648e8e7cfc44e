package selfupdate

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cotal-ai/cotal/extension"
)

// Updater runs `cotal update` without --self: the ancestor check, then the repair of the
// operator config and seed personas, then the extension pass. Set fields before Run.
type Updater struct {
	ConfigDir    string // $XDG_CONFIG_HOME/cotal; required
	ConfigRoot   Root   // the ancestor root of ConfigDir (its Env and Base for the fix)
	HomeDir      string // $COTAL_HOME; "" skips its check
	ProjectDir   string // the project's .cotal; "" when there is no project (no persona repair)
	ExtraRoots   []Root // more folders to check before any write
	Check        AncestorCheck
	Prefix       *extension.Prefix // the extensions prefix; required
	CLIVersion   string            // the running CLI's version
	ReinstallAll bool              // reinstall every extension, verified or not
	Reinstall    Reinstaller       // how a reinstall runs; nil reports each as failed
	Now          func() time.Time
	Say          func(Note) // each line as it happens; nil discards
}

// Roots returns the folders whose ancestry Run checks first.
func (u *Updater) Roots() []Root {
	cfg := u.ConfigRoot
	if cfg.Path == "" {
		cfg = Root{Label: "operator config", Path: u.ConfigDir}
	}
	roots := []Root{cfg}
	if u.HomeDir != "" {
		roots = append(roots, Root{Label: "machine home", Path: u.HomeDir, Env: "COTAL_HOME"})
	}
	if u.ProjectDir != "" {
		roots = append(roots, Root{Label: "project state", Path: u.ProjectDir, Base: filepath.Dir(u.ProjectDir)})
	}
	return append(roots, u.ExtraRoots...)
}

// Run checks, repairs and runs the extension pass. An unsafe ancestor returns an
// *UnsafeAncestorError before anything is written.
func (u *Updater) Run(ctx context.Context) (PassResult, error) {
	say := u.Say
	if say == nil {
		say = func(Note) {}
	}
	now := time.Now
	if u.Now != nil {
		now = u.Now
	}
	if err := u.Check.CheckAncestors(u.Roots()...); err != nil {
		return PassResult{}, err
	}
	notes, err := RepairConfig(u.ConfigDir, now())
	for _, n := range notes {
		say(n)
	}
	if err != nil {
		return PassResult{}, fmt.Errorf("update: %w", err)
	}
	if u.ProjectDir != "" {
		notes, err := RepairPersonas(u.ProjectDir, now())
		for _, n := range notes {
			say(n)
		}
		if err != nil {
			return PassResult{}, fmt.Errorf("update: %w", err)
		}
	}
	res, err := ExtensionPass(ctx, u.Prefix, u.CLIVersion, u.ReinstallAll, u.Reinstall, say)
	if err != nil {
		return res, fmt.Errorf("update: %w", err)
	}
	return res, nil
}
