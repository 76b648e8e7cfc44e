// Package agentrun prepares one agent run from a persona, for both launchers: `cotal
// spawn` in the foreground and the manager's seats. It picks the harness, builds the
// connector's Launch, names the credential the agent gets, claims the agent's private run
// folder (.cotal/run/<name>/), writes the harness's files (0600 in 0700 folders) and
// removes them after the run. It runs no program and mints nothing itself.
package agentrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cotal-ai/cotal/connector"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Overrides are what a launcher sets over the persona: "" keeps the persona's value.
type Overrides struct {
	Name      string
	Role      string
	Model     string
	Prompt    string
	HasPrompt bool
	Args      []string // after --: the harness's extra arguments, or command's program
}

// Target is where the agent runs: the project, the space and the mesh's URLs, whether
// the mesh checks credentials, this binary (the MCP server is `<Exe> mcp`) and the
// launcher's environment (nil reads nothing).
type Target struct {
	Project *workspace.Project
	Space   string
	Servers string
	Auth    bool
	Exe     string
	Getenv  func(string) string
}

// PickAgent names the harness: explicit, else the persona's agent:, else
// $COTAL_DEFAULT_AGENT, else claude. from says where the name came from, for a refusal.
func PickAgent(explicit string, per *workspace.Persona, getenv func(string) string) (name, from string) {
	if explicit != "" {
		return explicit, fmt.Sprintf("--agent %q", explicit)
	}
	if per.Agent != "" {
		return per.Agent, fmt.Sprintf("agent: %s in %s", per.Agent, per.Path)
	}
	if getenv != nil {
		if v := getenv("COTAL_DEFAULT_AGENT"); v != "" {
			return v, fmt.Sprintf("$COTAL_DEFAULT_AGENT %q", v)
		}
	}
	return "claude", "the default agent claude"
}

// NewLaunch is the connector launch of persona per with o over it.
func NewLaunch(t Target, per *workspace.Persona, o Overrides) connector.Launch {
	l := connector.Launch{
		Space: t.Space, Name: per.Name, Role: per.Role, Servers: t.Servers,
		Subscribe: per.BootSet(), Model: per.Model, Prompt: o.Prompt, HasPrompt: o.HasPrompt,
		SystemPrompt: per.Prompt, Args: o.Args, DataDir: t.Project.Dir(), Getenv: t.Getenv, Exe: t.Exe,
		Capabilities: per.Capabilities, Persona: per.Name,
		AllowSubscribe: per.ReadACL(), AllowPublish: per.AllowPublish, Quiet: per.Quiet, Muted: per.Muted,
		AgentFile: per.Path,
	}
	if o.Name != "" {
		l.Name = o.Name
	}
	if o.Role != "" {
		l.Role = o.Role
	}
	if o.Model != "" {
		l.Model = o.Model
	}
	l.RunDir = RunDir(t.Project, l.Name)
	if t.Auth {
		l.CredsPath = filepath.Join(l.RunDir, "creds")
	}
	return l
}

// UserSpec is the least-privilege credential of l's agent, as `cotal join --persona`
// mints it, under the launch's name and role, for the launch's lifecycle uid (when it is
// "" the minter fills it).
func UserSpec(l connector.Launch, per *workspace.Persona) trust.UserSpec {
	return trust.UserSpec{Name: l.Name, Profile: trust.ProfileAgent, LifecycleUID: l.LifecycleUID,
		Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: l.Name}, Role: l.Role,
		Subscribe: per.Subscribe, AllowSubscribe: per.ReadACL(), AllowPublish: per.AllowPublish,
		Capabilities: per.Capabilities}
}

// RunDir is the private folder of one running agent's files: its creds and configuration.
func RunDir(proj *workspace.Project, name string) string {
	return filepath.Join(proj.Dir(), "run", name)
}

// ErrRunning is Claim's refusal: another launcher runs an agent of that name from this
// project.
type ErrRunning struct {
	Name string
	PID  int // the launcher holding the folder
}

func (e *ErrRunning) Error() string {
	return fmt.Sprintf("%s is already running from this project (pid %d)", e.Name, e.PID)
}

// Claim makes the agent's private run folder dir, with pid's pidfile in it, refusing
// with *ErrRunning while a live process holds it; a folder a dead launcher left (its
// credential with it) is removed first. release removes the folder and everything in it.
func Claim(dir, name string, pid int) (release func() error, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("run folder: %w", err)
	}
	pidfile := filepath.Join(dir, "spawn.pid")
	for attempt := 0; ; attempt++ {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || attempt > 0 {
			return nil, fmt.Errorf("run folder: %w", err)
		}
		if rec, rerr := workspace.ReadPidfile(pidfile); rerr == nil {
			if alive, aerr := rec.Alive(); aerr != nil || alive {
				return nil, &ErrRunning{Name: name, PID: rec.PID}
			}
		}
		if err := os.RemoveAll(dir); err != nil { // a dead launcher's leftovers, its creds with them
			return nil, fmt.Errorf("remove stale run folder: %w", err)
		}
	}
	release = func() error { return os.RemoveAll(dir) }
	if err := workspace.WritePidfile(pidfile, pid); err != nil {
		return nil, errors.Join(err, release())
	}
	return release, nil
}

// Held reports whether a live process holds the run folder of name.
func Held(proj *workspace.Project, name string) bool {
	rec, err := workspace.ReadPidfile(filepath.Join(RunDir(proj, name), "spawn.pid"))
	if err != nil {
		return false
	}
	alive, err := rec.Alive()
	return err != nil || alive
}

// WriteFiles makes the spec's private folders and writes its files, 0600.
func WriteFiles(s connector.Spec) error {
	for _, d := range s.Dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("harness folder: %w", err)
		}
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("harness folder %s: not a folder (a symbolic link?)", d)
		}
	}
	for _, f := range s.Files {
		if f.Link != "" {
			if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("link %s: %w", f.Path, err)
			}
			if _, err := os.Stat(f.Link); err != nil {
				continue // nothing to link to
			}
			if err := os.Symlink(f.Link, f.Path); err != nil {
				return fmt.Errorf("link %s: %w", f.Path, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := atomicfile.WriteFile(f.Path, f.Data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// Cleanup removes what the spec lists for removal after a run, and only what lies inside
// one of the spec's own folders (Dirs): a path outside them, or one that reaches out of
// them through a symbolic link, is left alone and reported. A list read back from disk
// (a seat record) can name anything; nothing outside the run's folders is ever removed.
func Cleanup(s connector.Spec) error {
	var errs []error
	for _, path := range s.Remove {
		if err := removeWithin(s.Dirs, path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeWithin removes path when it lies inside one of dirs, resolved inside that folder
// (an os.Root: no symbolic link or .. leads out of it); a path already gone is not an
// error.
func removeWithin(dirs []string, path string) error {
	for _, dir := range dirs {
		if !filepath.IsAbs(dir) || !filepath.IsAbs(path) {
			continue
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		st, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the folder is gone, and what it held with it
		}
		if err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("remove %s: %s is not a folder (a symbolic link?); left alone", path, dir)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		defer func() { _ = root.Close() }()
		if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("remove %s: it is not inside the run's own folders; left alone", path)
}

// ChildEnv is the launcher's environment without its COTAL_* variables (the agent's
// identity is its own, never the operator's), plus the spec's.
func ChildEnv(environ []string, set map[string]string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "COTAL_") {
			continue
		}
		if _, ok := set[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range SortedKeys(set) {
		out = append(out, k+"="+set[k])
	}
	return out
}

// SortedKeys returns m's keys in order.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
