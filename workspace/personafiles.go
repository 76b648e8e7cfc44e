package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// AgentsDir returns the persona folder, <root>/.cotal/agents.
func (p *Project) AgentsDir() string { return filepath.Join(p.Dir(), "agents") }

// PersonaPath returns the file of the persona name, <root>/.cotal/agents/<name>.md.
func (p *Project) PersonaPath(name string) string {
	return filepath.Join(p.AgentsDir(), name+".md")
}

// Persona reads and checks the persona name. A missing file wraps ErrNoPersona; a bad one
// is a *ParseError naming the file and line, as is a name key that differs from the file name.
func (p *Project) Persona(name string) (*Persona, error) {
	if err := CheckPersonaName(name); err != nil {
		return nil, err
	}
	path := p.PersonaPath(name)
	data, err := readLimited(path, MaxPersonaSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w %q in %s", ErrNoPersona, name, p.AgentsDir())
	case err != nil:
		return nil, fmt.Errorf("read persona %q: %w", name, err)
	}
	return parsePersona(path, data, name)
}

// PersonaFile is one *.md file of the persona folder as PersonaFiles found it: the
// persona, or the error that makes it invalid.
type PersonaFile struct {
	Name    string   // the file name without .md
	Path    string   // the file
	Persona *Persona // nil when Err is set
	Err     error    // why the file is not a valid persona
}

// PersonaFiles lists every *.md file of the persona folder, sorted by name, each with its
// persona or the error that makes it invalid (as `cotal personas list` shows them). A
// project without the folder has none. The error is for the folder itself only.
func (p *Project) PersonaFiles() ([]PersonaFile, error) {
	entries, err := os.ReadDir(p.AgentsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list personas: %w", err)
	}
	var files []PersonaFile
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		pf := PersonaFile{Name: name, Path: filepath.Join(p.AgentsDir(), e.Name())}
		if err := CheckPersonaName(name); err != nil {
			pf.Err = fmt.Errorf("%s: file name: %w", pf.Path, err)
		} else {
			pf.Persona, pf.Err = p.Persona(name)
		}
		files = append(files, pf)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// Personas reads every persona of the project, sorted by name. The first invalid file is
// an error naming it (see PersonaFiles to list the valid ones beside the invalid).
func (p *Project) Personas() ([]*Persona, error) {
	files, err := p.PersonaFiles()
	if err != nil {
		return nil, err
	}
	out := make([]*Persona, 0, len(files))
	for _, f := range files {
		if f.Err != nil {
			return nil, fmt.Errorf("persona %s: %w", f.Name, f.Err)
		}
		out = append(out, f.Persona)
	}
	return out, nil
}

// WritePersona creates the file of per (0600, in a 0700 folder) atomically: the file
// appears whole or not at all. It never replaces one: an existing file wraps
// ErrPersonaExists (ReplacePersona replaces). per is validated first; on success per.Path
// is the file written.
func (p *Project) WritePersona(per *Persona) error {
	return p.writePersona(per, false)
}

// ReplacePersona is WritePersona that replaces an existing file of the same name.
func (p *Project) ReplacePersona(per *Persona) error {
	return p.writePersona(per, true)
}

func (p *Project) writePersona(per *Persona, replace bool) error {
	data, err := per.Render()
	if err != nil {
		return fmt.Errorf("write %w", err)
	}
	if err := ensureDir(p.Dir()); err != nil {
		return fmt.Errorf("write persona %q: %w", per.Name, err)
	}
	if err := ensureDir(p.AgentsDir()); err != nil {
		return fmt.Errorf("write persona %q: %w", per.Name, err)
	}
	path := p.PersonaPath(per.Name)
	if replace {
		err = atomicfile.WriteFile(path, data, 0o600)
	} else {
		err = createPersonaFile(path, data, 0o600)
	}
	if err != nil {
		return fmt.Errorf("write persona %q: %w", per.Name, err)
	}
	per.Path = path
	return nil
}

// RemovePersona deletes the persona file name, valid or not. A missing file wraps
// ErrNoPersona.
func (p *Project) RemovePersona(name string) error {
	if err := CheckPersonaName(name); err != nil {
		return err
	}
	path := p.PersonaPath(name)
	err := os.Remove(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w %q in %s", ErrNoPersona, name, p.AgentsDir())
	case err != nil:
		return fmt.Errorf("remove persona %q: %w", name, err)
	}
	if err := atomicfile.SyncDir(p.AgentsDir()); err != nil {
		return fmt.Errorf("remove persona %q: sync folder: %w", name, err)
	}
	return nil
}

// readLimited reads a regular file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	// Stat before opening: opening a named pipe waits for a writer, which may never come.
	// A stat error is left to the open, which words it.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read only: nothing to lose
	// Check again what was opened: the path may have changed since.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: over the %d-byte limit", path, limit)
	}
	return data, nil
}

// createPersonaFile creates path with data, refusing with ErrPersonaExists when it exists.
func createPersonaFile(path string, data []byte, perm os.FileMode) error {
	err := atomicfile.CreateFile(path, data, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrPersonaExists, path)
	}
	return err
}
