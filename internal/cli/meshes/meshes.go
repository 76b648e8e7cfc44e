// Package meshes implements `cotal meshes`: the per-user registry of remote user-auth
// meshes, <config>/cotal/meshes/<space>.json, filled from each mesh's discovery bundle.
package meshes

import (
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
)

// NewCmdMeshes builds `cotal meshes` and its subcommands.
func NewCmdMeshes(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "meshes <command>",
		Short: "Register, list and remove remote user-auth meshes",
		Long: `A remote user-auth mesh is a space someone else hosts: its auth service publishes a
discovery bundle at <public URL>/.well-known/cotal-mesh naming the broker, the IdP you
sign in with, its token-exchange endpoints and the sentinel creds every client connects
as. cotal meshes add fetches that bundle and records it, per user, in
<config>/cotal/meshes/<space>.json (<config> is $XDG_CONFIG_HOME or ~/.config).

The public URL a space was added from is pinned: adding the space again from another URL
is refused until you remove it with cotal meshes rm. Nothing here starts or stops a mesh.`,
		Example: `  cotal meshes add team --from https://mesh.example.com
  cotal login --idp https://idp.example.com/realms/team
  cotal meshes list
  cotal meshes rm team`,
	}
	cmd.AddCommand(
		NewCmdAdd(f, nil),
		NewCmdList(f, nil),
		NewCmdRm(f, nil),
	)
	return cmdutil.Group(cmd)
}
