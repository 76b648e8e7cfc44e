package cmdutil

import (
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// ManifestMode checks the broker mode of the manifest m read from path, as `cotal up -f`
// and `cotal topology view` both do: per-user authentication is refused (this build has
// none), and an open mesh may not carry limits (flagLimits: --max-* were given too). It
// reports whether the mesh is open.
func ManifestMode(m *workspace.Manifest, path string, flagLimits bool) (open bool, err error) {
	switch m.Broker.Auth {
	case workspace.AuthUser:
		return false, Refuse("broker.auth user in "+path, "per-user authentication is not in this build", "cotal up -f "+path+"  # after setting broker.auth to static")
	case workspace.AuthOpen:
		if m.Limits != (trust.Limits{}) || flagLimits {
			return true, FlagErrorf("limits in %s (or --max-*) and broker.auth: false exclude each other: an open mesh has no accounts to bound", path)
		}
		return true, nil
	}
	return false, nil
}
