package cmdutil

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/meshreg"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// Factory hands commands their dependencies. Fields are funcs so that --help and bad
// flags never touch disk or network.
type Factory struct {
	IO         *iostreams.IOStreams
	Getwd      func() (string, error)
	Executable func() (string, error)
	Getenv     func(string) string
	// LookupEnv tells a variable set to "" from one not set; nil reads Getenv, where the
	// two look alike.
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger // diagnostics of libraries (stderr); nil means discard
}

// Lookup returns the environment variable key and whether it is set, even to "".
func (f *Factory) Lookup(key string) (string, bool) {
	if f.LookupEnv != nil {
		return f.LookupEnv(key)
	}
	if f.Getenv == nil {
		return "", false
	}
	v := f.Getenv(key)
	return v, v != ""
}

// MeshFlags are the flags of every command that talks to a mesh.
type MeshFlags struct {
	Space  string
	Server string
	Creds  string
	TLSCA  string // --tls-ca: the CA file the mesh's TLS certificate is checked against
}

// Register adds --space, --server and --creds to fs. --space is checked as it is parsed:
// an empty or invalid space name is a usage error of every command that takes it.
func (m *MeshFlags) Register(fs *pflag.FlagSet) {
	SpaceVar(fs, &m.Space, "space to use (default: the one cotal use set, when reachable; else the project's space)")
	fs.StringVar(&m.Server, "server", "", "NATS URL of the mesh (default: the project's running mesh)")
	fs.StringVar(&m.Creds, "creds", "", "NATS creds file to connect with (default: the project's own identity)")
	fs.StringVar(&m.TLSCA, "tls-ca", "", "CA file (PEM) the mesh's TLS certificate is signed by (default: the one the mesh was registered or started with, else the system's)")
}

// SpaceVar adds --space to fs, stored in p: a space name checked as it is parsed, so an
// empty or invalid one is a usage error (exit 2) before the command does anything.
func SpaceVar(fs *pflag.FlagSet, p *string, usage string) {
	fs.Var(spaceFlag{p}, "space", usage)
}

// spaceFlag is the value of --space: a space name, refused when empty or not a space.
type spaceFlag struct{ p *string }

func (s spaceFlag) String() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

func (s spaceFlag) Set(v string) error {
	if v == "" {
		return errors.New("a space name is required; leave --space out to use the project's space")
	}
	if err := protocol.CheckSpace(v); err != nil {
		return err
	}
	*s.p = v
	return nil
}

func (s spaceFlag) Type() string { return "string" }

// Target is the mesh a command talks to.
type Target struct {
	Server    string
	Space     string
	Creds     string             // --creds: a creds file, which decides who connects
	CredsData []byte             // a credential in hand (minted on the fly); wins over Creds
	Project   *workspace.Project // nil outside a project
	Mesh      *workspace.Mesh    // the project's record, nil without one
	// Remote is the registered remote mesh of Space (cotal meshes add), when the project
	// does not serve the space itself; clients sign in through its public face.
	Remote *meshreg.Entry
	// TLSCA is the CA file the server's TLS certificate is checked against: --tls-ca, else
	// the one the project's mesh or the registered remote mesh recorded; "" means the
	// system's roots.
	TLSCA string
}

// TLSOptions are the connect options for the target's TLS (none without a CA file).
func (t Target) TLSOptions() []nats.Option { return client.TLSOptions(t.TLSCA) }

// Auth reports whether the target is an authenticated mesh: a creds file was given, or
// the project's mesh record says so (and the target is that mesh, see OnProjectMesh).
func (t Target) Auth() bool {
	return t.Creds != "" || t.CredsData != nil || t.Remote != nil || (t.OnProjectMesh() && t.Mesh.Mode == workspace.ModeAuth)
}

// OnProjectMesh reports whether the target's server is the project's recorded mesh: its
// URL or URL list, or a list that shares a URL with it (--server a,b,c: the nodes of a
// cluster the project's broker is one of; a mesh on external servers records their list),
// so the project's keys and sign-in apply to it.
func (t Target) OnProjectMesh() bool {
	if t.Mesh == nil {
		return false
	}
	recorded := strings.Split(t.Mesh.Server, ",")
	return slices.ContainsFunc(strings.Split(t.Server, ","), func(u string) bool { return slices.Contains(recorded, u) })
}

// Resolve picks the mesh: --server and --space when given; without both, the default
// space `cotal use` recorded when this project's mesh serves it or it is a registered
// remote mesh; otherwise the running mesh recorded in the project's .cotal/, found by
// walking up from the current folder.
func (f *Factory) Resolve(flags MeshFlags) (Target, error) {
	if flags.Server != "" {
		if err := CheckServerURLs(flags.Server); err != nil {
			return Target{Space: flags.Space}, FlagErrorf("--server: %w", err)
		}
	}
	t := Target{Server: client.ServerURL(flags.Server), Space: flags.Space, Creds: flags.Creds, TLSCA: flags.TLSCA}
	if t.TLSCA != "" {
		if _, err := CAFile(t.TLSCA); err != nil { // read here, bounded: a dial would read it whole
			return t, err
		}
	}
	if t.Space != "" {
		if err := protocol.CheckSpace(t.Space); err != nil {
			return t, FlagErrorf("space: %w", err)
		}
	}
	wd, err := f.Getwd()
	var proj *workspace.Project
	if err == nil {
		proj, err = workspace.FindProject(wd, f.Getenv)
	}
	if flags.Space == "" && flags.Server == "" { // the default space of cotal use, when reachable
		d, derr := f.defaultSpace(proj, flags.Creds)
		if derr != nil {
			return t, derr
		}
		flags.Space, t.Space = d, d
	}
	if remote, rerr := f.remote(flags, proj); rerr != nil || remote != nil {
		if rerr != nil {
			return t, rerr
		}
		t.Project, t.Remote = proj, remote
		if t.Server == "" {
			t.Server = remote.Server
		}
		if t.TLSCA == "" {
			t.TLSCA = remote.TLSCA
		}
		return t, nil
	}
	if err != nil && t.Server != "" && t.Space != "" {
		return t, nil
	}
	if err != nil {
		if !errors.Is(err, workspace.ErrNoProject) {
			return t, err
		}
		if t.Server != "" {
			return t, RefuseUsage("--server without --space outside a project",
				"no .cotal/ was found from "+wd+" upward to say which space to use: name the space the mesh at "+t.Server+" serves with --space", "")
		}
		return t, noMesh(wd, f.Getenv)
	}
	t.Project = proj
	mesh, err := proj.ReadMesh()
	switch {
	case errors.Is(err, workspace.ErrNoMesh):
	case err != nil:
		return t, err
	default:
		t.Mesh = mesh
		if t.TLSCA == "" && (t.Server == "" || t.OnProjectMesh()) {
			t.TLSCA = mesh.TLSCA
		}
	}
	if t.Server == "" {
		if t.Mesh == nil || !MeshRunning(proj) {
			return t, WithNext(fmt.Errorf("no mesh is running for %s", proj.Root), "cotal up --detach")
		}
		t.Server = t.Mesh.Server
	}
	if t.Space == "" {
		if t.Mesh != nil && len(t.Mesh.Spaces) > 0 {
			t.Space = t.Mesh.Spaces[0]
		} else {
			t.Space = proj.DefaultSpace()
		}
	}
	return t, nil
}

// noMesh is the failure of a command run outside any project with no --server: the next
// command starts a mesh here, or, in the machine home (never a project), in a new folder.
func noMesh(wd string, getenv func(string) string) error {
	if err := workspace.ControlFileFrom(wd); err != nil {
		return fmt.Errorf("no mesh to talk to: %w", err)
	}
	err := fmt.Errorf("no mesh to talk to: no .cotal/ was found from %s upward, and no --server was given", wd)
	if getenv != nil {
		if home, herr := workspace.MachineHome(getenv); herr == nil && filepath.Dir(home) == wd {
			return WithNext(err, "mkdir -p ~/my-project && cd ~/my-project && cotal up --detach")
		}
	}
	return WithNext(err, "cotal up --detach")
}

// remote returns the registered remote mesh of --space when the project (if any) does not
// serve that space itself, or nil.
func (f *Factory) remote(flags MeshFlags, proj *workspace.Project) (*meshreg.Entry, error) {
	if flags.Space == "" || flags.Creds != "" {
		return nil, nil
	}
	if proj != nil {
		if mesh, err := proj.ReadMesh(); err == nil && slices.Contains(mesh.Spaces, flags.Space) {
			return nil, nil
		}
	}
	dir, err := f.MeshRegistryDir()
	if err != nil {
		return nil, nil // no config folder: nothing registered
	}
	e, err := meshreg.Get(dir, flags.Space)
	if errors.Is(err, meshreg.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// MeshRunning reports whether the broker recorded by proj's pidfile is alive.
func MeshRunning(proj *workspace.Project) bool {
	rec, err := workspace.ReadPidfile(proj.PidFile())
	if err != nil {
		return false
	}
	alive, err := rec.Alive()
	return err == nil && alive
}
