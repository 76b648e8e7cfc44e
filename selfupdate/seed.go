package selfupdate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/atomicfile"
)

// Note is one line of what setup or update did or found.
type Note struct {
	Mark string // → wrote, ✓ fine, ! look at this, ↻ reinstalling, ✗ failed
	Text string
}

// String is the line as printed: the mark, a space, the text.
func (n Note) String() string { return n.Mark + " " + n.Text }

func wrote(path, why string) Note {
	if why != "" {
		return Note{"→", "wrote " + path + " (" + why + ")"}
	}
	return Note{"→", "wrote " + path}
}

// ConfigName is the operator config file in the config folder.
const ConfigName = "config.json"

// seedConfig is the config setup writes: an empty object, which means "no connectors, no
// extra spawn env, no model policy" (cli.md §4.3).
const seedConfig = "{}\n"

// ConfigState is what is on disk at config.json.
type ConfigState struct {
	Missing bool
	Corrupt string // why it is not a JSON object; "" when it is one (or is missing)
}

// ReadConfigState reads <dir>/config.json and says whether it is missing or corrupt.
func ReadConfigState(dir string) (ConfigState, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ConfigName))
	if errors.Is(err, fs.ErrNotExist) {
		return ConfigState{Missing: true}, nil
	}
	if err != nil {
		return ConfigState{}, fmt.Errorf("read operator config: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ConfigState{Corrupt: "not a JSON object: " + err.Error()}, nil
	}
	if obj == nil {
		return ConfigState{Corrupt: "not a JSON object: null"}, nil
	}
	return ConfigState{}, nil
}

// SeedConfig writes <dir>/config.json, {}, when it is missing; an existing file is left
// as it is, corrupt or not.
func SeedConfig(dir string) ([]Note, error) {
	st, err := ReadConfigState(dir)
	if err != nil || !st.Missing {
		return nil, err
	}
	return writeConfig(dir, "")
}

// RepairConfig makes <dir>/config.json a JSON object: a missing file is seeded; a corrupt
// one is copied aside to config.json.bak-<UTC time> and reseeded, saying so; a valid one,
// whatever it holds, is kept.
func RepairConfig(dir string, now time.Time) ([]Note, error) {
	path := filepath.Join(dir, ConfigName)
	st, err := ReadConfigState(dir)
	switch {
	case err != nil:
		return nil, err
	case st.Missing:
		return writeConfig(dir, "was missing")
	case st.Corrupt == "":
		return []Note{{"✓", "operator config " + path}}, nil
	}
	bak, err := backup(path, now)
	if err != nil {
		return nil, fmt.Errorf("repair operator config: %w", err)
	}
	notes := []Note{{"!", fmt.Sprintf("operator config %s was %s: moved it aside to %s", path, st.Corrupt, bak)}}
	more, err := writeConfig(dir, "reseeded")
	return append(notes, more...), err
}

func writeConfig(dir, why string) ([]Note, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("operator config folder: %w", err)
	}
	path := filepath.Join(dir, ConfigName)
	if err := atomicfile.WriteFile(path, []byte(seedConfig), 0o600); err != nil {
		return nil, fmt.Errorf("seed operator config: %w", err)
	}
	return []Note{wrote(path, why)}, nil
}

// backup copies path to path.bak-<UTC time> (-2, -3... when that is taken) and returns
// the backup's path. The original stays until the caller replaces it, so a crash never
// leaves neither.
func backup(path string, now time.Time) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	base := path + ".bak-" + now.UTC().Format("20060102T150405Z")
	bak := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(bak); errors.Is(err, fs.ErrNotExist) {
			break
		}
		bak = base + "-" + strconv.Itoa(i)
	}
	if err := atomicfile.WriteFile(bak, raw, 0o600); err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	return bak, nil
}

// ManagedMarker is the line that marks a persona file cotal setup wrote and may refresh.
// A user who removes it owns the file: update leaves it alone.
const ManagedMarker = "# managed by cotal-setup"

// Persona is a seed persona file.
type Persona struct {
	Name    string // file <project>/.cotal/agents/<Name>.md
	Content string
}

// SeedPersonas returns the personas setup seeds: default.
func SeedPersonas() []Persona {
	return []Persona{{Name: "default", Content: `---
` + ManagedMarker + `
# cotal setup and cotal update refresh this file; delete the line above to keep your edits.
name: default
role: default
kind: agent
description: a general-purpose agent on this mesh
subscribe: [general]
allowSubscribe: [">"]
allowPublish: [">"]
capabilities: [spawn, run]
---
You are an agent on a shared Cotal mesh. Other agents and people see your presence and
talk to you three ways: posts on channels, direct messages, and requests to your role.
Say what you are working on, answer what is addressed to you, and keep replies short.
`}}
}

// PersonaPath returns <controlDir>/agents/<name>.md, controlDir being a project's .cotal.
func PersonaPath(controlDir, name string) string {
	return filepath.Join(controlDir, "agents", name+".md")
}

// PersonaState is what is on disk for a seed persona.
type PersonaState string

// The states of a seed persona file.
const (
	PersonaMissing PersonaState = "missing" // no file
	PersonaCurrent PersonaState = "current" // managed and as this cotal seeds it
	PersonaStale   PersonaState = "stale"   // managed, but differs from the seed
	PersonaUser    PersonaState = "user"    // the user removed the marker: theirs
	PersonaCorrupt PersonaState = "corrupt" // no marker and no persona front matter
)

// ReadPersonaState reads the file of p under controlDir.
func ReadPersonaState(controlDir string, p Persona) (PersonaState, error) {
	raw, err := os.ReadFile(PersonaPath(controlDir, p.Name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return PersonaMissing, nil
	case err != nil:
		return "", fmt.Errorf("read persona %s: %w", p.Name, err)
	case string(raw) == p.Content:
		return PersonaCurrent, nil
	case hasLine(raw, ManagedMarker):
		return PersonaStale, nil
	case looksLikePersona(raw):
		return PersonaUser, nil
	}
	return PersonaCorrupt, nil
}

// hasLine reports whether raw has a line that is exactly line, spaces aside.
func hasLine(raw []byte, line string) bool {
	for l := range bytes.Lines(raw) {
		if strings.TrimSpace(string(l)) == line {
			return true
		}
	}
	return false
}

// looksLikePersona accepts YAML front matter between --- lines with a name: key.
func looksLikePersona(raw []byte) bool {
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	rest, ok := strings.CutPrefix(s, "---\n")
	if !ok {
		return false
	}
	front, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return false
	}
	for l := range strings.Lines(front) {
		if strings.HasPrefix(l, "name:") && strings.TrimSpace(strings.TrimPrefix(l, "name:")) != "" {
			return true
		}
	}
	return false
}

// SeedPersonaFiles writes each seed persona that is missing under controlDir; files that
// exist are left as they are.
func SeedPersonaFiles(controlDir string) ([]Note, error) {
	var notes []Note
	for _, p := range SeedPersonas() {
		st, err := ReadPersonaState(controlDir, p)
		if err != nil {
			return notes, err
		}
		if st != PersonaMissing {
			continue
		}
		if err := writePersona(controlDir, p); err != nil {
			return notes, err
		}
		notes = append(notes, wrote(PersonaPath(controlDir, p.Name), ""))
	}
	return notes, nil
}

// RepairPersonas restores the seed personas under controlDir and keeps user edits: a
// missing file is written; a managed file that differs from the seed is backed up to
// <name>.md.bak and refreshed; a file whose marker the user removed is left alone; a file
// that is not a persona at all is copied aside to <name>.md.bak-<UTC time> and rewritten.
func RepairPersonas(controlDir string, now time.Time) ([]Note, error) {
	var notes []Note
	for _, p := range SeedPersonas() {
		path := PersonaPath(controlDir, p.Name)
		st, err := ReadPersonaState(controlDir, p)
		if err != nil {
			return notes, err
		}
		switch st {
		case PersonaCurrent:
			notes = append(notes, Note{"✓", "persona " + p.Name + " " + path})
			continue
		case PersonaUser:
			notes = append(notes, Note{"✓", "persona " + p.Name + " " + path + " kept: you removed its managed marker, so it is yours"})
			continue
		case PersonaStale:
			raw, err := os.ReadFile(path)
			if err != nil {
				return notes, fmt.Errorf("persona %s: %w", p.Name, err)
			}
			if err := atomicfile.WriteFile(path+".bak", raw, 0o600); err != nil {
				return notes, fmt.Errorf("persona %s: back up: %w", p.Name, err)
			}
			notes = append(notes, Note{"!", "persona " + p.Name + " differed from the seed: previous copy in " + path + ".bak"})
		case PersonaCorrupt:
			bak, err := backup(path, now)
			if err != nil {
				return notes, fmt.Errorf("persona %s: %w", p.Name, err)
			}
			notes = append(notes, Note{"!", "persona " + p.Name + " " + path + " was not a persona file: moved it aside to " + bak})
		}
		if err := writePersona(controlDir, p); err != nil {
			return notes, err
		}
		why := map[PersonaState]string{PersonaMissing: "was missing", PersonaStale: "refreshed", PersonaCorrupt: "reseeded"}[st]
		notes = append(notes, wrote(path, why))
	}
	return notes, nil
}

func writePersona(controlDir string, p Persona) error {
	path := PersonaPath(controlDir, p.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("persona %s: %w", p.Name, err)
	}
	if err := atomicfile.WriteFile(path, []byte(p.Content), 0o600); err != nil {
		return fmt.Errorf("persona %s: %w", p.Name, err)
	}
	return nil
}
