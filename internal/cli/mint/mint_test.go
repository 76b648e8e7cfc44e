package mint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// TestRunMintWithoutTerminal runs mint's run function on Options built by hand: the mesh
// is what Resolve returns and the credential comes from a real trust chain's Mint, so no
// Factory, terminal or broker is involved.
func TestRunMintWithoutTerminal(t *testing.T) {
	proj, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		t.Fatal(err)
	}
	acct, err := chain.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	target := cmdutil.Target{Server: "nats://127.0.0.1:4222", Space: "main", Project: proj,
		Mesh: &workspace.Mesh{Mode: workspace.ModeAuth, Server: "nats://127.0.0.1:4222", Spaces: []string{"main"}}}
	ios, _, out, errOut := iostreams.Test()
	var minted trust.UserSpec
	opts := &Options{
		IO:      ios,
		Resolve: func(cmdutil.MeshFlags) (cmdutil.Target, error) { return target, nil },
		Mint: func(_ cmdutil.Target, spec trust.UserSpec) ([]byte, error) {
			minted = spec
			return acct.Mint(spec)
		},
		Name: "watcher", Profile: string(trust.ProfileObserver),
	}
	if err := runMint(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	path := cmdutil.CredsPath(proj, "main", "watcher")
	if out.String() != "✓ wrote "+path+"\n" {
		t.Fatalf("stdout %q", out)
	}
	if minted.Profile != trust.ProfileObserver || minted.Principal.Actor != "watcher" {
		t.Fatalf("minted %+v", minted)
	}
	if !strings.Contains(errOut.String(), "observer profile, principal local.watcher") {
		t.Fatalf("stderr %q", errOut)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || filepath.Dir(path) != proj.CredsDir("main") {
		t.Fatalf("creds file %s: %v %v", path, fi, err)
	}
}
