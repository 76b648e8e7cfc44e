package authsvc

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/spacehost"
)

// Run is the auth service for embedders: it parses args with the flags of `cotal
// auth-service` (RegisterFlags: the same table and defaults, checked by CheckFlags) plus
// --trust, the trust folder the CLI finds in the project, and serves until ctx ends, one
// space or a host of spaces alike, keeping the bearer issuer keys and owner secrets in
// store (nil means files in the trust folder). Unlike the CLI it finds nothing in a
// project: --trust, --server and a space (--space or --spaces) are required. Logs go to
// stderr, a host's lines prefixed with [<space>].
//
//	--trust DIR --server URL (--space S [--port N] [public face flags] | --spaces MANIFEST
//	[--callout-only]) [--tls-ca FILE] [--auth-timeout D] [--service-endpoints]
func Run(ctx context.Context, args []string, store bearer.Store) error {
	cfg, err := ParseArgs(args, os.Stderr)
	if err != nil {
		return err
	}
	cfg.Store = store
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if cfg.Spaces != "" {
		h = spacehost.NewPrefixHandler(h)
	}
	cfg.Logger = slog.New(h)
	return Serve(ctx, cfg, nil, nil)
}

// ParseArgs reads Run's flags into a Config; usage and errors go to out.
func ParseArgs(args []string, out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("auth-service", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.TrustDir, "trust", "", "the broker's trust folder (.cotal/auth)")
	RegisterFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("auth service: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("auth service: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := CheckFlags(&c, func(name string) bool { return set[name] }); err != nil {
		return Config{}, fmt.Errorf("auth service: %w", err)
	}
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("auth service: %w", err)
	}
	return c, nil
}
