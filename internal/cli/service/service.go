// Package service implements `cotal service install|status|uninstall`: the agent manager
// of a project's space (`cotal supervise`) as a systemd user unit, so that it outlives the
// terminal and the `cotal up` that started the mesh.
package service

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/launch"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
	"github.com/spf13/cobra"
)

// Options are the flags of `cotal service`.
type Options struct {
	IO *iostreams.IOStreams
	// From the Factory: only run calls them.
	Getwd      func() (string, error)
	Getenv     func(string) string
	ConfigHome func() (string, error)
	Executable func() (string, error)

	Space  string
	Server string
	Force  bool
	JSON   bool // status --json: print the Status as one JSON document
	// GOOS is the system the unit is for; "" means runtime.GOOS.
	GOOS string
}

// NewCmdService builds `cotal service` and its install, status and uninstall commands.
func NewCmdService(f *cmdutil.Factory, runF func(op string, o *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service install|status|uninstall [--space S]",
		Short: "Run the agent manager as a systemd user service",
		Long: `Run the agent manager of this project's space (cotal supervise) as a systemd user unit,
so that it outlives the terminal: restarted whenever it exits (Restart=always), started
at login once enabled.

install writes the unit $XDG_CONFIG_HOME/systemd/user/cotal-manager-<space>.service and
its environment file $XDG_CONFIG_HOME/cotal/services/manager-<space>.env (0600): the
space, the mesh URL when --server pins one (else the project's running mesh is found at
each start) and the PATH the harnesses are found on. Neither holds a secret: the manager
signs in with the project's own keys, in .cotal/. It never runs systemctl itself: it prints
the commands to run. It refuses while cotal up runs a manager for the space (two managers
of one host contend for one lease): hold that one down first with cotal down manager, and
start the mesh with cotal up --no-manager from then on.

status says whether the unit is installed and for which project; uninstall removes the
unit, its enablement link and its environment file, and prints how to stop the running
manager. macOS (launchd) is not supported yet: run cotal supervise under your own
supervisor there.`,
		Example: `  cotal service install
  systemctl --user daemon-reload && systemctl --user enable --now cotal-manager-main.service
  cotal service status
  cotal service uninstall`,
	}
	for _, op := range []struct{ name, short, example string }{
		{"install", "Write the manager's systemd user unit and environment file", `  cotal service install
  cotal service install --space team --server nats://10.0.0.2:4222`},
		{"status", "Say whether the manager's unit is installed, and for which project", `  cotal service status
  cotal service status --space team`},
		{"uninstall", "Remove the manager's unit and environment file", `  cotal service uninstall
  cotal service uninstall --space team`},
	} {
		opts := &Options{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, ConfigHome: f.ConfigHome, Executable: f.Executable}
		sub := &cobra.Command{
			Use:     op.name + " [--space S]",
			Short:   op.short,
			Example: op.example,
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if runF != nil {
					return runF(op.name, opts)
				}
				switch op.name {
				case "install":
					return runInstall(opts)
				case "status":
					return runStatus(opts)
				}
				return runUninstall(opts)
			},
		}
		cmdutil.SpaceVar(sub.Flags(), &opts.Space, "space whose manager it runs (default: the project's space)")
		if op.name == "status" {
			sub.Flags().BoolVar(&opts.JSON, "json", false, "print the status as one JSON document")
		}
		if op.name == "install" {
			sub.Flags().StringVar(&opts.Server, "server", "", "pin the mesh's NATS URL (default: the project's running mesh, found at each start)")
			sub.Flags().BoolVar(&opts.Force, "force", false, "replace a unit of the same name written for another project or with other facts")
		}
		cmd.AddCommand(sub)
	}
	cmdutil.Group(cmd)
	return cmd
}

// plan is what install writes and the others read.
type plan struct {
	proj             *workspace.Project
	space            string
	unit             string // the unit's name
	unitPath, envDir string
	envPath, wants   string
}

func (o *Options) plan(verb string) (*plan, error) {
	goos := o.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	if goos != "linux" {
		return nil, cmdutil.Refuse("cotal service "+verb+" on "+goos, "only systemd user units (Linux) are supported; a launchd agent (macOS) is not written yet",
			"cotal supervise"+spaceArg(o.Space)+" --wait")
	}
	wd, err := o.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current folder: %w", err)
	}
	proj, err := workspace.FindProject(wd, o.Getenv)
	if errors.Is(err, workspace.ErrNoProject) {
		proj, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if proj == nil {
		if verb != "install" { // a unit belongs to the project it was installed from
			return nil, cmdutil.Refuse("cotal service "+verb+" outside a project",
				"the unit of a space's manager belongs to the project it was installed from: run this in that folder", "")
		}
		return nil, cmdutil.Refuse("cotal service install outside a project",
			"the manager serves a project's space and runs its personas from its .cotal/; make a project folder and install from there",
			cmdutil.NewProjectNext(wd, "cotal service install"+spaceArg(o.Space)))
	}
	space := o.Space
	if space == "" {
		space = proj.DefaultSpace()
		if mesh, err := proj.ReadMesh(); err == nil && len(mesh.Spaces) > 0 {
			space = mesh.Spaces[0]
		}
	}
	if err := protocol.CheckSpace(space); err != nil {
		return nil, cmdutil.FlagErrorf("space %q: %v", space, err)
	}
	cfg, err := o.ConfigHome()
	if err != nil {
		return nil, err
	}
	p := &plan{proj: proj, space: space, unit: "cotal-manager-" + space + ".service"}
	p.unitPath = filepath.Join(cfg, "systemd", "user", p.unit)
	p.wants = filepath.Join(cfg, "systemd", "user", "default.target.wants", p.unit)
	p.envDir = filepath.Join(cfg, "cotal", "services")
	p.envPath = filepath.Join(p.envDir, "manager-"+space+".env")
	return p, nil
}

// spaceArg is the --space argument of a next line: none when no space was named.
func spaceArg(s string) string {
	if s == "" {
		return ""
	}
	return " --space " + s
}

// Unit is the systemd user unit of the manager of space in the project at root, run by
// exe, with its facts in envPath.
func Unit(exe, root, space, envPath string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by `cotal service install`: the cotal agent manager of space %s\n", space)
	fmt.Fprintf(&b, "# for the project %s. Remove it with `cotal service uninstall --space %s`.\n", root, space)
	b.WriteString("[Unit]\n")
	fmt.Fprintf(&b, "Description=cotal agent manager (space %s, project %s)\n", space, root)
	b.WriteString("After=network-online.target\n\n")
	b.WriteString("[Service]\nType=simple\n")
	fmt.Fprintf(&b, "EnvironmentFile=%s\n", envPath)
	fmt.Fprintf(&b, "WorkingDirectory=%s\n", root)
	fmt.Fprintf(&b, "ExecStart=%s supervise --space ${COTAL_SPACE} --server ${COTAL_SERVER} --wait\n", quoteArg(exe))
	b.WriteString("Restart=always\nRestartSec=5\n")
	b.WriteString("# SIGTERM to the manager only: it stops its seats itself (SIGTERM, SIGKILL 10 s later).\n")
	b.WriteString("KillMode=mixed\nTimeoutStopSec=30\n\n")
	b.WriteString("[Install]\nWantedBy=default.target\n")
	return b.Bytes()
}

// Env is the unit's environment file: the mesh facts and the PATH the harnesses are on.
func Env(space, server, path string) []byte {
	var b bytes.Buffer
	b.WriteString("# Mesh facts of the cotal agent manager, written by `cotal service install`.\n")
	b.WriteString("# No secret: the manager signs in with the project's own keys in .cotal/.\n")
	fmt.Fprintf(&b, "COTAL_SPACE=%s\n", quoteEnv(space))
	b.WriteString("# Empty: the project's running mesh, found at each start.\n")
	fmt.Fprintf(&b, "COTAL_SERVER=%s\n", quoteEnv(server))
	fmt.Fprintf(&b, "PATH=%s\n", quoteEnv(path))
	return b.Bytes()
}

// quoteArg quotes a word of ExecStart when it needs it.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}

// quoteEnv quotes a value of an environment file when it needs it.
func quoteEnv(s string) string {
	if !strings.ContainsAny(s, " \t\"'\\$#") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func runInstall(o *Options) error {
	p, err := o.plan("install")
	if err != nil {
		return err
	}
	if o.Server != "" {
		if u, err := url.Parse(o.Server); err != nil || u.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme) {
			return cmdutil.RefuseUsage("--server "+o.Server, "it is not a NATS URL (nats://, tls://, ws:// or wss:// with a host)", "")
		}
	}
	// cotal up's manager would contend with the unit's for the one lease of this host.
	if d, ok := workspace.DaemonNamed("manager"); ok {
		if rec, err := workspace.ReadPidfile(d.PidFile(p.proj, p.space)); err == nil {
			if alive, _ := rec.Alive(); alive {
				return cmdutil.Refuse("a manager service for space "+p.space,
					fmt.Sprintf("cotal up runs a manager for it now (pid %d): two managers of one host contend for one lease", rec.PID),
					"cotal down manager --space "+p.space+" && cotal service install --space "+p.space)
			}
		}
	}
	exe, err := launch.Self(o.Executable)
	if err != nil {
		return fmt.Errorf("find the cotal executable for the unit: %w", err)
	}
	unit := Unit(exe, p.proj.Root, p.space, p.envPath)
	env := Env(p.space, o.Server, o.Getenv("PATH"))
	old, err := os.ReadFile(p.unitPath)
	switch {
	case err == nil && !o.Force && !bytes.Equal(old, unit):
		return cmdutil.Refuse("a new unit at "+p.unitPath, "a unit of that name is there and says something else (another project, or another cotal)",
			"cotal service install --space "+p.space+" --force")
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", p.unitPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(p.unitPath), 0o755); err != nil {
		return fmt.Errorf("unit folder: %w", err)
	}
	if err := os.MkdirAll(p.envDir, 0o700); err != nil {
		return fmt.Errorf("environment folder: %w", err)
	}
	if err := atomicfile.WriteFile(p.envPath, env, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", p.envPath, err)
	}
	if err := atomicfile.WriteFile(p.unitPath, unit, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p.unitPath, err)
	}
	out := o.IO.Out
	fmt.Fprintf(out, "✓ wrote %s\n", p.unitPath)
	fmt.Fprintf(out, "✓ wrote %s (0600)\n", p.envPath)
	fmt.Fprintf(out, "start it now and at each login:\n  systemctl --user daemon-reload && systemctl --user enable --now %s\n", p.unit)
	fmt.Fprintf(out, "from now on start the mesh with `cotal up --no-manager` (or keep `cotal down manager` holding cotal up's down)\n")
	return nil
}

func runStatus(o *Options) error {
	p, err := o.plan("status")
	if err != nil {
		return err
	}
	out := o.IO.Out
	b, err := os.ReadFile(p.unitPath)
	if o.JSON {
		return statusJSON(o, p, b, err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "%s: not installed\n", p.unit)
		fmt.Fprintf(out, "next: run `cotal service install --space %s`\n", p.space)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p.unitPath, err)
	}
	root := field(b, "WorkingDirectory=")
	fmt.Fprintf(out, "%s: installed at %s\n", p.unit, p.unitPath)
	fmt.Fprintf(out, "  project %s\n", root)
	if root != p.proj.Root {
		fmt.Fprintf(out, "  ! written for another project than this one (%s)\n", p.proj.Root)
	}
	if _, err := os.Stat(p.envPath); err != nil {
		fmt.Fprintf(out, "  ! its environment file %s is missing: run `cotal service install --space %s --force`\n", p.envPath, p.space)
	}
	if _, err := os.Lstat(p.wants); err == nil {
		fmt.Fprintln(out, "  enabled (starts at login)")
	} else {
		fmt.Fprintf(out, "  not enabled: run `systemctl --user enable --now %s`\n", p.unit)
	}
	fmt.Fprintf(out, "  is it running? `systemctl --user status %s`, or `cotal ps`\n", p.unit)
	return nil
}

// Status is what `cotal service status --json` prints.
type Status struct {
	Unit           string `json:"unit"`
	Installed      bool   `json:"installed"`
	Path           string `json:"path,omitempty"`    // the unit file, when installed
	Project        string `json:"project,omitempty"` // the project the unit was written for
	OtherProject   bool   `json:"otherProject,omitempty"`
	EnvFileMissing bool   `json:"envFileMissing,omitempty"`
	Enabled        bool   `json:"enabled"`
}

// statusJSON prints the Status of p's unit, whose file read gave b and err.
func statusJSON(o *Options, p *plan, b []byte, err error) error {
	st := Status{Unit: p.unit}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", p.unitPath, err)
	default:
		st.Installed, st.Path = true, p.unitPath
		st.Project = field(b, "WorkingDirectory=")
		st.OtherProject = st.Project != p.proj.Root
		if _, err := os.Stat(p.envPath); err != nil {
			st.EnvFileMissing = true
		}
		if _, err := os.Lstat(p.wants); err == nil {
			st.Enabled = true
		}
	}
	return cmdutil.WriteJSON(o.IO.Out, st)
}

// field is the value of the first line of b that starts with key.
func field(b []byte, key string) string {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			return v
		}
	}
	return ""
}

func runUninstall(o *Options) error {
	p, err := o.plan("uninstall")
	if err != nil {
		return err
	}
	out := o.IO.Out
	removed := 0
	for _, path := range []string{p.wants, p.unitPath, p.envPath} {
		err := os.Remove(path)
		switch {
		case err == nil:
			removed++
			fmt.Fprintf(out, "✓ removed %s\n", path)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	if removed == 0 {
		fmt.Fprintf(out, "%s is not installed: nothing to remove\n", p.unit)
		return nil
	}
	fmt.Fprintf(out, "stop the manager it ran, if it runs:\n  systemctl --user stop %s && systemctl --user daemon-reload\n", p.unit)
	return nil
}
