package cmdutil

import (
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

// MachineHome returns $COTAL_HOME, else ~/.cotal: the mesh registry, never a project
// (workspace.MachineHome).
func (f *Factory) MachineHome() (string, error) { return workspace.MachineHome(f.Getenv) }

func (f *Factory) userHome() (string, error) {
	if h := f.Getenv("HOME"); filepath.IsAbs(h) {
		return h, nil
	}
	return os.UserHomeDir()
}
