package meshes

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/meshreg"
)

// ListOptions are the flags of `cotal meshes list`.
type ListOptions struct {
	IO   *iostreams.IOStreams
	Dir  func() (string, error) // registry folder; only run calls it
	JSON bool
}

// View is a registered mesh as `list --json` prints it: the entry without its sentinel creds.
type View struct {
	Space                string    `json:"space"`
	Server               string    `json:"server"`
	TLSRequired          bool      `json:"tlsRequired"`
	IdPIssuer            string    `json:"idpIssuer"`
	IdPClientID          string    `json:"idpClientId"`
	ExchangeURL          string    `json:"exchangeUrl"`
	JWKSURL              string    `json:"jwksUrl"`
	AgentProvisioningURL string    `json:"agentProvisioningUrl,omitempty"`
	AddedAt              time.Time `json:"addedAt"`
}

// NewCmdList builds `cotal meshes list`.
func NewCmdList(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{IO: f.IO, Dir: f.MeshRegistryDir}
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the registered remote meshes",
		Long: `List the remote user-auth meshes registered with cotal meshes add, sorted by space: the
broker, the IdP issuer to sign in with and the pinned public URL. --json prints one array
of the entries (without the sentinel creds). An entry file that is not valid fails the
list, naming the file; cotal meshes rm <space> removes it.`,
		Example: `  cotal meshes list
  cotal meshes list --json | jq -r '.[].space'`,
		Aliases: []string{"ls"},
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON array")
	return cmd
}

func runList(_ context.Context, opts *ListOptions) error {
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	entries, err := meshreg.List(dir)
	if err != nil {
		return err
	}
	if opts.JSON {
		views := make([]View, 0, len(entries))
		for _, e := range entries {
			views = append(views, View{Space: e.Space, Server: e.Server, TLSRequired: e.TLSRequired,
				IdPIssuer: e.IdPIssuer, IdPClientID: e.IdPClientID, ExchangeURL: e.ExchangeURL, JWKSURL: e.JWKSURL,
				AgentProvisioningURL: e.AgentProvisioningURL, AddedAt: e.AddedAt})
		}
		if err := cmdutil.WriteJSON(opts.IO.Out, views); err != nil {
			return fmt.Errorf("encode meshes: %w", err)
		}
		return nil
	}
	if len(entries) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no remote meshes registered; register one with cotal meshes add SPACE --from URL (the public URL its operator gives)")
		return nil
	}
	w := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SPACE\tSERVER\tIDP\tURL")
	for _, e := range entries {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Space, e.Server, e.IdPIssuer, e.ExchangeURL)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("print meshes: %w", err)
	}
	return nil
}
