package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cotal-ai/cotal/protocol"
)

// ControlDir is the name of the control directory a project folder holds.
const ControlDir = ".cotal"

// ErrNoProject reports that no folder from the start folder up to the file system root
// holds a .cotal/ directory.
var ErrNoProject = errors.New("no .cotal/ found")

// Project is a folder holding a .cotal/ control directory.
type Project struct {
	Root string // absolute path of the folder that holds .cotal
}

// Find walks up from dir, an existing folder made absolute against the working directory,
// to the first folder holding a .cotal/ directory, like git looks for .git. A .cotal that is
// a regular file is passed over, and so is a .cotal/ that is the same directory as one of
// ignore: pass the machine home (~/.cotal, or $COTAL_HOME) there, because it sits above
// every folder under $HOME and is not a project. Paths in ignore that do not exist are
// skipped. When no folder qualifies, the error wraps ErrNoProject and says what to do next.
func Find(dir string, ignore ...string) (*Project, error) {
	start, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("find project from %s: %w", dir, err)
	}
	if fi, err := os.Stat(start); err != nil {
		return nil, fmt.Errorf("find project from %s: %w", start, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("find project from %s: not a directory", start)
	}
	var skip []os.FileInfo
	for _, p := range ignore {
		fi, err := os.Stat(p)
		if err != nil {
			continue // an ignored folder that does not exist cannot match
		}
		skip = append(skip, fi)
	}
	for d := start; ; d = filepath.Dir(d) {
		fi, err := os.Stat(filepath.Join(d, ControlDir))
		switch {
		case err == nil && fi.IsDir() && !sameAsAny(fi, skip):
			return &Project{Root: d}, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("find project from %s: %w", start, err)
		}
		if filepath.Dir(d) == d { // the file system root is done
			break
		}
	}
	return nil, fmt.Errorf("%w from %s upward; run `cotal up` in your project folder, or pass --server/--space", ErrNoProject, start)
}

// MachineHome returns the machine folder, which holds the mesh registry and is never a
// project: $COTAL_HOME made absolute when it is set, else <home>/.cotal, where home is
// $HOME when it is absolute and the OS's answer (os.UserHomeDir) otherwise. getenv reads
// the environment (os.Getenv in the binary, a map in tests).
func MachineHome(getenv func(string) string) (string, error) {
	if h := getenv("COTAL_HOME"); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return "", fmt.Errorf("machine home $COTAL_HOME %s: %w", h, err)
		}
		return abs, nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ControlDir), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("machine home: %w", err)
	}
	return filepath.Join(h, ControlDir), nil
}

// FindProject is how every command finds its project: Find from wd, passing over the
// machine home (MachineHome of getenv). When no machine home can be named (no
// $COTAL_HOME and no home folder), nothing is passed over. No project is an error
// wrapping ErrNoProject.
func FindProject(wd string, getenv func(string) string) (*Project, error) {
	home, err := MachineHome(getenv)
	if err != nil {
		return Find(wd)
	}
	return Find(wd, home)
}

// sameAsAny reports whether fi is the same file as one in list.
func sameAsAny(fi os.FileInfo, list []os.FileInfo) bool {
	for _, o := range list {
		if os.SameFile(fi, o) {
			return true
		}
	}
	return false
}

// Open returns the project at root, creating root/.cotal/ with mode 0700 when missing.
// root must be an existing folder; it is made absolute. An existing .cotal that is not a
// directory is an error; an existing directory is used as it is.
func Open(root string) (*Project, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open project %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open project %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open project %s: not a directory", abs)
	}
	if err := ControlFile(abs); err != nil {
		return nil, fmt.Errorf("open project %s: %w", abs, err)
	}
	p := &Project{Root: abs}
	if err := ensureDir(p.Dir()); err != nil {
		return nil, fmt.Errorf("open project %s: %w", abs, err)
	}
	return p, nil
}

// ErrControlFile reports a .cotal that is a file, where a project keeps its .cotal/ folder.
var ErrControlFile = errors.New("a file, where a project keeps its .cotal/ folder")

// ControlFile returns an error wrapping ErrControlFile, saying what to do, when root/.cotal
// is a file (or anything but a folder); nil otherwise, also when it does not exist.
func ControlFile(root string) error {
	control := filepath.Join(root, ControlDir)
	if fi, err := os.Stat(control); err != nil || fi.IsDir() {
		return nil
	}
	return fmt.Errorf("%s is %w; move it out of the way, then run cotal up in %s", control, ErrControlFile, root)
}

// ControlFileFrom is ControlFile of the first folder from dir upward whose .cotal is a
// file, or nil: why Find, which passes such a file over, found no project.
func ControlFileFrom(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		if err := ControlFile(d); err != nil {
			return err
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// ensureDir creates dir with mode 0700 (exactly, whatever the umask) unless it exists, and
// checks that what exists is a directory.
func ensureDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil:
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("set mode of %s: %w", dir, err)
		}
		return nil
	case errors.Is(err, fs.ErrExist):
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	default:
		return err
	}
}

// Dir returns the control directory, <root>/.cotal.
func (p *Project) Dir() string { return filepath.Join(p.Root, ControlDir) }

// StoreDir returns the embedded broker's JetStream store, <root>/.cotal/nats.
func (p *Project) StoreDir() string { return filepath.Join(p.Dir(), "nats") }

// PidFile returns the embedded broker's pidfile, <root>/.cotal/nats.pid.
func (p *Project) PidFile() string { return filepath.Join(p.Dir(), "nats.pid") }

// LogFile returns the embedded broker's log, <root>/.cotal/nats.log.
func (p *Project) LogFile() string { return filepath.Join(p.Dir(), "nats.log") }

// MeshFile returns the mesh record, <root>/.cotal/mesh.json.
func (p *Project) MeshFile() string { return filepath.Join(p.Dir(), "mesh.json") }

// DefaultSpace returns the space a project serves when none is named: the project folder's
// name as a token (protocol.Token), so "/src/my app" gives "my_app".
func (p *Project) DefaultSpace() string { return protocol.Token(filepath.Base(p.Root)) }
