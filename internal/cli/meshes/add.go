package meshes

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/devicelogin"
	"github.com/cotal-ai/cotal/exchangewire"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/internal/redact"
	"github.com/cotal-ai/cotal/meshreg"
	"github.com/cotal-ai/cotal/protocol"
)

// AddOptions are the flags of `cotal meshes add`.
type AddOptions struct {
	IO    *iostreams.IOStreams
	Dir   func() (string, error)                                              // registry folder; only run calls it
	Fetch func(ctx context.Context, base string) (exchangewire.Bundle, error) // nil means exchangewire.FetchBundle
	Now   func() time.Time                                                    // nil means time.Now

	Space string
	From  string // the mesh's public base URL, as given
	Force bool
	TLSCA string // --tls-ca: the CA file (PEM) of the mesh's TLS certificate, recorded as an absolute path
}

// NewCmdAdd builds `cotal meshes add`.
func NewCmdAdd(f *cmdutil.Factory, runF func(context.Context, *AddOptions) error) *cobra.Command {
	opts := &AddOptions{IO: f.IO, Dir: f.MeshRegistryDir}
	cmd := &cobra.Command{
		Use:   "add <space> --from <public URL> [--force]",
		Short: "Register a remote user-auth mesh from its discovery bundle",
		Long: `Fetch the discovery bundle of a mesh's public face, <public URL>/.well-known/cotal-mesh,
check it strictly and record it as <space>. The bundle must be for <space>. The URL must
be https:// (http:// only on a loopback IP such as 127.0.0.1); redirects are not followed.

The URL is pinned: adding <space> again from another URL is refused until you run
cotal meshes rm <space>. Adding it again from the same URL updates nothing when the bundle
is unchanged, and is refused when the bundle changed (another server, IdP or sentinel
creds) unless --force, which takes the new bundle.

Then sign in with the IdP the bundle names: cotal prints the cotal login command to run.`,
		Example: `  cotal meshes add team --from https://mesh.example.com
  cotal meshes add team --from https://example.com/cotal --force
  cotal meshes add dev --from http://127.0.0.1:8443`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Space = args[0]
			if err := protocol.CheckSpace(opts.Space); err != nil {
				return cmdutil.FlagErrorf("<space>: %v", err)
			}
			if opts.From == "" {
				return cmdutil.FlagErrorf("--from is required: the mesh's public URL, e.g. https://mesh.example.com")
			}
			if _, err := meshreg.BaseURL(opts.From); err != nil {
				return cmdutil.FlagErrorf("--from: %v", err)
			}
			if opts.TLSCA != "" {
				abs, err := cmdutil.CAFile(opts.TLSCA)
				if err != nil {
					return err
				}
				opts.TLSCA = abs
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runAdd(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.From, "from", "", "public URL of the mesh's auth service (required)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace a registered entry whose bundle changed (same URL only)")
	cmd.Flags().StringVar(&opts.TLSCA, "tls-ca", "", "CA file (PEM) the mesh's TLS certificate is signed by; recorded, so its clients trust it")
	return cmd
}

func runAdd(ctx context.Context, opts *AddOptions) error {
	fetch, now := opts.Fetch, opts.Now
	if fetch == nil {
		fetch = exchangewire.FetchBundle
	}
	if now == nil {
		now = time.Now
	}
	dir, err := opts.Dir()
	if err != nil {
		return err
	}
	from := redact.URL(opts.From) // what is printed: never a password or a query's token
	what := fmt.Sprintf("add mesh %q from %s", opts.Space, from)
	retry := "cotal meshes add " + opts.Space + " --from <the mesh's public URL>"
	b, err := fetch(ctx, opts.From)
	var urlErr *url.Error
	switch {
	case errors.As(err, &urlErr):
		return cmdutil.Refuse(what, fmt.Sprintf("its discovery bundle could not be fetched: %v; is the mesh's auth service running with a public face?", redact.RequestError(urlErr)), retry)
	case err != nil:
		return cmdutil.Refuse(what, fmt.Sprintf("it serves no valid discovery bundle (%v); check the URL, or ask the mesh's operator to fix the public face", err), retry)
	}
	if b.Space != opts.Space {
		return cmdutil.Refuse(what, fmt.Sprintf("its bundle is for space %q, not %q", b.Space, opts.Space),
			"cotal meshes add "+b.Space+" --from "+from)
	}
	e, err := meshreg.FromBundle(b, opts.From, now())
	if err != nil {
		return fmt.Errorf("add mesh %q: %w", opts.Space, err)
	}
	if opts.TLSCA != "" {
		e.TLSCA, e.TLSRequired = opts.TLSCA, true
	}
	var pinned *meshreg.PinnedError
	var exists *meshreg.ExistsError
	err = meshreg.Add(dir, e, opts.Force)
	switch {
	case errors.As(err, &pinned):
		return cmdutil.Refuse(what, fmt.Sprintf("%q is registered from %s, and a mesh's public URL is pinned; remove it first", opts.Space, pinned.Pinned),
			"cotal meshes rm "+opts.Space+"; cotal meshes add "+opts.Space+" --from "+from)
	case errors.As(err, &exists):
		return cmdutil.Refuse(what, fmt.Sprintf("%q is registered from this URL with another %v; the mesh changed since it was added", opts.Space, exists.Changed),
			"cotal meshes add "+opts.Space+" --from "+from+" --force")
	case err != nil:
		return err
	}
	if b.UserAuth.Endpoints.URL != e.ExchangeURL {
		fmt.Fprintf(opts.IO.ErrOut, "note: the bundle names its public URL %s; cotal pinned %s, where it fetched it\n", b.UserAuth.Endpoints.URL, e.ExchangeURL)
	}
	login := "cotal login --idp " + e.LoginURL()
	if !e.ReferenceIdP() && e.IdPClientID != devicelogin.DefaultClientID {
		login += " --client-id " + e.IdPClientID
	}
	fmt.Fprintf(opts.IO.Out, "✓ registered mesh %s: server %s, sign in with %s\n", e.Space, e.Server, login)
	return nil
}
