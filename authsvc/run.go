package authsvc

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/spacehost"
)

// Run is the auth service for embedders: it parses args like `cotal auth-service` (plus
// --trust, the trust folder the CLI finds in the project) and serves until ctx ends, one
// space or a host of spaces alike, keeping the bearer issuer keys and owner secrets in
// store (nil means files in the trust folder). Logs go to stderr, a host's lines prefixed
// with [<space>].
//
//	--trust DIR --server URL (--space S [--port N] [public face flags] | --spaces MANIFEST
//	[--callout-only]) [--auth-timeout D] [--service-endpoints]
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
	fs.StringVar(&c.Server, "server", "", "NATS URL of the broker")
	fs.StringVar(&c.Space, "space", "", "the one space to serve")
	fs.StringVar(&c.Spaces, "spaces", "", "a space manifest: one lane per space")
	fs.BoolVar(&c.CalloutOnly, "callout-only", false, "with --spaces: the callouts alone, all or none")
	fs.IntVar(&c.Port, "port", 0, "with --space: the exchange's loopback port (0: ephemeral)")
	fs.DurationVar(&c.AuthTimeout, "auth-timeout", 0, "bound on one authorization (0: the default)")
	fs.BoolVar(&c.ServiceEndpoints, "service-endpoints", false, "register each callout as a NATS micro service")
	fs.IntVar(&c.Public.Port, string(exchange.SettingPort), 0, "with --space: serve the public face on 127.0.0.1:N")
	fs.StringVar(&c.Public.URL, string(exchange.SettingURL), "", "the public face's https:// URL")
	fs.BoolVar(&c.Public.TrustedProxy, string(exchange.SettingTrustedProxy), false, "key refusal limits on the last X-Forwarded-For hop")
	fs.StringVar(&c.Public.AdvertisedServer, string(exchange.SettingAdvertisedServer), "", "the broker URL the discovery bundle names")
	fs.StringVar(&c.Public.AgentProvisioningURL, string(exchange.SettingProvisioningURL), "", "the agent provisioning https:// URL")
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("auth service: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("auth service: unexpected argument %q", fs.Arg(0))
	}
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("auth service: %w", err)
	}
	return c, nil
}
