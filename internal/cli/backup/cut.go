package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cotal-ai/cotal/backup"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// Cut is one backup of a project's running mesh.
type Cut struct {
	Project     *workspace.Project
	Spaces      []string // the spaces to back up; nil means every space the mesh serves
	Path        string   // the archive to write
	IncludeAuth bool     // also the trust chain with its seeds
	Force       bool     // replace an existing file at Path
	Now         func() time.Time
}

// Write backs up the spaces of c from the mesh c.Project runs (the embedded broker or an
// external one) to c.Path, each space as its account's provisioner (anonymously on an
// open mesh).
func (c Cut) Write(ctx context.Context) (*backup.Manifest, error) {
	proj := c.Project
	if !cmdutil.MeshRunning(proj) {
		return nil, cmdutil.Refuse("a backup of "+proj.Root, "no mesh runs there; a backup is cut from a running mesh",
			"cotal up --detach")
	}
	mesh, err := proj.ReadMesh()
	if err != nil {
		return nil, err
	}
	spaces := c.Spaces
	if spaces == nil {
		spaces = mesh.Spaces
	}
	for _, s := range spaces {
		if !slices.Contains(mesh.Spaces, s) {
			return nil, cmdutil.Refuse(fmt.Sprintf("a backup of space %q", s), "the mesh of "+proj.Root+" does not serve it",
				"cotal backup create --all --out "+cmdutil.ShellQuote(c.Path))
		}
	}
	plan := backup.Plan{Mode: mesh.Mode, Force: c.Force, Now: c.Now}
	var chain *trust.Chain
	if mesh.Mode == workspace.ModeAuth {
		if chain, err = trust.Open(proj.AuthDir()); err != nil {
			return nil, err
		}
		plan.Operator, plan.OperatorJWT = chain.OperatorPublicKey(), chain.OperatorJWT()
	} else if c.IncludeAuth {
		return nil, cmdutil.RefuseUsage("--include-auth", "the mesh of "+proj.Root+" is open: it has no keys to back up", "")
	}
	if c.IncludeAuth {
		var buf bytes.Buffer
		if _, err := trust.Export(proj.AuthDir(), &buf); err != nil {
			return nil, err
		}
		plan.Chain = buf.Bytes()
	}
	for _, s := range spaces {
		var creds []byte
		src := backup.SpaceSource{Name: s}
		if chain != nil {
			acct, err := chain.Space(s)
			if err != nil {
				return nil, err
			}
			creds, err = acct.Mint(trust.UserSpec{Name: "cotal backup", Profile: trust.ProfileProvisioner,
				Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_backup"}, ExpiresIn: time.Hour})
			if err != nil {
				return nil, err
			}
			src.Account, src.AccountJWT = acct.PublicKey(), acct.JWT()
		}
		nc, err := cmdutil.DialCreds(mesh.Server, creds, mesh.TLSCA, "cotal backup")
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		src.Conn = nc
		plan.Spaces = append(plan.Spaces, src)
	}
	return backup.Write(ctx, c.Path, plan)
}

// CheckOut checks an archive path before anything is cut: its folder exists and is no
// folder anyone may replace files in (world-writable without the sticky bit), and no file
// is there unless force.
func CheckOut(path string, force bool) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return cmdutil.RefuseUsage("--out "+path, fmt.Sprintf("its folder %s: %v", dir, err), "")
	}
	if !fi.IsDir() {
		return cmdutil.RefuseUsage("--out "+path, dir+" is not a folder", "")
	}
	if fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return cmdutil.RefuseUsage("--out "+path, dir+" is writable by anyone (mode "+fi.Mode().Perm().String()+
			", no sticky bit), so another user could replace the archive; write it to a folder of yours", "")
	}
	if lfi, err := os.Lstat(path); err == nil {
		if lfi.IsDir() {
			return cmdutil.RefuseUsage("--out "+path, "it is a folder; name the archive file to write", "")
		}
		if !force {
			return cmdutil.RefuseUsage("--out "+path, "the file exists and a backup never replaces one unasked; name another file, or add --force to replace it", "")
		}
	}
	return nil
}
