// Mode add-space: `cotal up --space` on a mesh that already runs provisions one more space.

package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// addSpace provisions space on the mesh that already runs for proj, pushing its account
// to the broker first on an authenticated mesh. Nothing else changes, and no connected
// peer of another space notices.
func addSpace(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	mesh, err := proj.ReadMesh()
	if err != nil {
		return err
	}
	if opts.TLSCA == "" {
		opts.TLSCA = mesh.TLSCA // the running mesh's CA, for up's own connections
	}
	if mesh.Mode != opts.mode() {
		return cmdutil.Refuse("`"+strings.TrimSuffix(upCommand(opts.mode()), " --detach")+"` on a running "+modeName(mesh.Mode),
			"the mode of a running mesh does not change", "cotal down && "+upCommand(opts.mode()))
	}
	if opts.ClusterName != "" {
		return cmdutil.Refuse("--cluster-name "+opts.ClusterName+" on a running mesh",
			"the broker of this project already runs at "+mesh.Server+" and does not join a cluster while it runs",
			"cotal down && cotal up --detach "+strings.Join(opts.clusterArgs(), " "))
	}
	if opts.External != "" && opts.External != mesh.Server {
		return cmdutil.Refuse("--external "+opts.External, "the mesh of this project already runs at "+mesh.Server,
			"cotal down && cotal up --detach --external "+opts.External)
	}
	if opts.Server != "" && opts.Server != mesh.Server {
		return cmdutil.Refuse("--server "+opts.Server, "the mesh of this project already runs at "+mesh.Server,
			"cotal down && cotal up --server "+opts.Server)
	}
	// Nothing is written or pushed unless every record this run updates can be written.
	dirs := []string{proj.Dir()}
	if mesh.Mode == workspace.ModeAuth {
		dirs = append(dirs, proj.AuthDir())
	}
	if err := checkWritable("to add space "+space, dirs...); err != nil {
		return err
	}
	var chain *trust.Chain
	if mesh.Mode == workspace.ModeAuth {
		if chain, err = trust.Open(proj.AuthDir()); err != nil {
			return err
		}
		known, err := chain.Spaces()
		if err != nil {
			return err
		}
		changed, err := opts.applyLimits(chain, space, withSpace(space, known), opts.IO.ErrOut)
		if err != nil {
			return err
		}
		// The running broker takes the space's account, and every account whose limits
		// changed, at once: the limits hold from the next write on.
		for _, s := range withSpace(space, changed) {
			if err := pushAccount(ctx, chain, mesh.Server, opts.TLSCA, s); err != nil {
				return err
			}
		}
	}
	if err := provisionSpace(ctx, opts.IO.ErrOut, chain, proj, mesh.Server, opts.TLSCA, space, opts.Replicas, nil); err != nil {
		return err
	}
	if err := applyManifest(ctx, opts, chain, proj, mesh.Server); err != nil {
		return err
	}
	if !slices.Contains(mesh.Spaces, space) {
		mesh.Spaces = append(mesh.Spaces, space)
		if err := proj.WriteMesh(mesh); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "✓ space %q added to the running mesh at %s\n", space, mesh.Server)
	} else {
		fmt.Fprintf(opts.IO.Out, "✓ mesh already running at %s (space %s, %s)\n", mesh.Server, space, modeName(mesh.Mode))
	}
	if chain == nil {
		return nil
	}
	// Daemons `cotal down <component>` held down start again: the named space's, or every
	// space's when none is named.
	spaces := []string{space}
	if opts.Space == "" {
		spaces = mesh.Spaces
	}
	if err := proj.ReleaseHeld(spaces...); err != nil {
		return err
	}
	for _, s := range spaces {
		for _, k := range kinds(chain, proj, mesh.Server, opts.NoManager) {
			if err := waitDaemon(ctx, opts, k, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWritable refuses what when a folder in dirs cannot take a new file: it creates and
// removes a probe file in each, before anything is written.
func checkWritable(what string, dirs ...string) error {
	for _, d := range dirs {
		f, err := os.CreateTemp(d, ".write-check-*")
		if err != nil {
			return cmdutil.Refuse(what, fmt.Sprintf("%s is not writable (%v), so its records could not be kept; nothing was changed", d, err),
				"chmod u+w "+d)
		}
		name := f.Name()
		if err := errors.Join(f.Close(), os.Remove(name)); err != nil {
			return fmt.Errorf("%s: remove write check: %w", d, err)
		}
	}
	return nil
}

// pushAccount creates the space's account if needed and hands it to the running broker.
func pushAccount(ctx context.Context, chain *trust.Chain, server, ca, space string) error {
	acct, err := chain.Space(space)
	if err != nil {
		return err
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := cmdutil.DialCreds(server, sysCreds, ca, "")
	if err != nil {
		return err
	}
	defer sys.Close()
	return trust.PushAccount(ctx, sys, acct.JWT())
}
