package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/a2agw"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/internal/cli/iostreams"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/workspace"
)

// TokenOptions are the flags of `cotal a2a token`.
type TokenOptions struct {
	IO     *iostreams.IOStreams
	Getwd  func() (string, error)
	Getenv func(string) string
	Now    func() time.Time

	Name string
	TTL  time.Duration
	JSON bool
}

// NewCmdToken builds `cotal a2a token`.
func NewCmdToken(f *cmdutil.Factory, runF func(context.Context, *TokenOptions) error) *cobra.Command {
	opts := &TokenOptions{IO: f.IO, Getwd: f.Getwd, Getenv: f.Getenv, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "token [--name N] [--ttl D] [--json]",
		Short: "Mint a bearer token for A2A callers off loopback",
		Long: `Mint a bearer token a caller presents (Authorization: Bearer <token>) to a gateway
serving off loopback (cotal a2a --allow-remote). The token is printed once and kept
nowhere: the project stores only its SHA-256, with its name and expiry, in
.cotal/a2a/tokens.json (mode 0600). A running gateway accepts it at once. A caller with
a token acts as the gateway's identity, with its permissions, never more.`,
		Example: `  cotal a2a token --name ci --ttl 720h
  cotal a2a token --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Name == "" || len(opts.Name) > 64 || !protocol.ValidActor(opts.Name) {
				return cmdutil.FlagErrorf("--name %q: want 1 to 64 letters, digits or _", opts.Name)
			}
			if opts.TTL < 0 {
				return cmdutil.FlagErrorf("--ttl %s: want a positive duration such as 720h, or 0 for a token that never expires", opts.TTL)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runToken(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "caller", "a name for the token (who holds it)")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 30*24*time.Hour, "how long the token is valid (0: never expires)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document")
	return cmd
}

func runToken(opts *TokenOptions) error {
	wd, err := opts.Getwd()
	if err != nil {
		return err
	}
	p, err := workspace.FindProject(wd, opts.Getenv)
	if err != nil || p == nil {
		return cmdutil.Refuse("a token outside a project", "tokens are kept in a project's .cotal/a2a/tokens.json", "cotal up")
	}
	tok, e, err := a2agw.MintToken(tokensPath(p), opts.Name, opts.TTL, opts.Now())
	if err != nil {
		return err
	}
	if opts.JSON {
		doc := map[string]any{"name": e.Name, "token": tok, "sha256": e.SHA256, "created": e.Created}
		if !e.Expires.IsZero() {
			doc["expires"] = e.Expires
		}
		b, _ := json.MarshalIndent(doc, "", "  ")
		fmt.Fprintln(opts.IO.Out, string(b))
		return nil
	}
	fmt.Fprintln(opts.IO.Out, tok)
	exp := "never expires"
	if !e.Expires.IsZero() {
		exp = "expires " + e.Expires.Format(time.RFC3339)
	}
	fmt.Fprintf(opts.IO.ErrOut, "✓ a2a token %q (%s): shown once, only its hash is kept in %s\n", e.Name, exp, tokensPath(p))
	return nil
}
