package workspace

import "path/filepath"

// AuthDir is where the trust chain of the project's broker lives: <root>/.cotal/auth.
func (p *Project) AuthDir() string { return filepath.Join(p.Dir(), "auth") }

// CredsDir is where minted creds files of a space go: .cotal/auth/creds/space.<hex>.
func (p *Project) CredsDir(space string) string {
	return filepath.Join(p.AuthDir(), "creds", "space."+SpaceKey(space))
}
