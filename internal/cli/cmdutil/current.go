package cmdutil

import (
	"errors"
	"slices"

	"github.com/cotal-ai/cotal/meshreg"
	"github.com/cotal-ai/cotal/workspace"
)

// CurrentSpace returns the default space `cotal use` recorded on this machine (in the
// machine home's current-mesh), or "" when none is recorded.
func (f *Factory) CurrentSpace() (string, error) {
	if f.Getenv == nil {
		return "", nil // no environment to name the machine home by
	}
	home, err := f.MachineHome()
	if err != nil {
		return "", nil // no machine home can be named: nothing was recorded
	}
	return workspace.ReadCurrentSpace(home)
}

// Reach says where a space is reached from here: the project's running mesh, or a
// remote mesh registered with cotal meshes add.
type Reach struct {
	Project bool // the project's mesh serves it
	Remote  bool // a registered remote mesh
}

// Reachable tells where space is reached from here: from proj's recorded mesh (nil: no
// project) and the registry of remote meshes.
func (f *Factory) Reachable(proj *workspace.Project, space string) (Reach, error) {
	var r Reach
	if proj != nil {
		if mesh, err := proj.ReadMesh(); err == nil && slices.Contains(mesh.Spaces, space) {
			r.Project = true
		}
	}
	dir, err := f.MeshRegistryDir()
	if err != nil {
		return r, nil // no config folder: nothing registered
	}
	if _, err := meshreg.Get(dir, space); err == nil {
		r.Remote = true
	} else if !errors.Is(err, meshreg.ErrNotFound) {
		return r, err
	}
	return r, nil
}

// defaultSpace is the space a command given neither --space nor --server addresses when
// `cotal use` recorded one it can reach: one the project's mesh serves, or a registered
// remote mesh (unless --creds names the identity, which a remote mesh does not take). A
// recorded space not reachable from here is passed over, so the project's own space is
// used, as the reference passes over a current mesh that is not live.
func (f *Factory) defaultSpace(proj *workspace.Project, creds string) (string, error) {
	space, err := f.CurrentSpace()
	if err != nil || space == "" {
		return "", err
	}
	r, err := f.Reachable(proj, space)
	if err != nil {
		return "", err
	}
	if r.Project || (r.Remote && creds == "") {
		return space, nil
	}
	return "", nil
}
