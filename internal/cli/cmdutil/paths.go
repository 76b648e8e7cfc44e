package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/workspace"
)

// ConfigHome returns the folder XDG_CONFIG_HOME names, or ~/.config when it is unset or
// not absolute (as the XDG spec says to treat it).
func (f *Factory) ConfigHome() (string, error) {
	if x := f.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Clean(x), nil
	}
	home, err := f.userHome()
	if err != nil {
		return "", fmt.Errorf("operator config folder: %w", err)
	}
	return filepath.Join(home, ".config"), nil
}

// ConfigDir returns the operator config folder, <ConfigHome>/cotal: config.json and the
// extensions prefix.
func (f *Factory) ConfigDir() (string, error) {
	h, err := f.ConfigHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(h, "cotal"), nil
}

// ExtensionsDir returns the extensions prefix, <ConfigDir>/extensions.
func (f *Factory) ExtensionsDir() (string, error) {
	d, err := f.ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "extensions"), nil
}

// MachineHome returns $COTAL_HOME, else ~/.cotal: the mesh registry, never a project.
func (f *Factory) MachineHome() (string, error) {
	if h := f.Getenv("COTAL_HOME"); h != "" {
		return filepath.Abs(h)
	}
	home, err := f.userHome()
	if err != nil {
		return "", fmt.Errorf("machine home: %w", err)
	}
	return filepath.Join(home, workspace.ControlDir), nil
}

// FindProject returns the project found by walking up from the current folder, or nil
// when there is none.
func (f *Factory) FindProject() (*workspace.Project, error) {
	wd, err := f.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	home, err := f.MachineHome()
	if err != nil {
		return nil, err
	}
	proj, err := workspace.Find(wd, home)
	if errors.Is(err, workspace.ErrNoProject) {
		return nil, nil
	}
	return proj, err
}

func (f *Factory) userHome() (string, error) {
	if h := f.Getenv("HOME"); filepath.IsAbs(h) {
		return h, nil
	}
	return os.UserHomeDir()
}
