// Mode external: serve the project's spaces on a nats-server cotal did not start (--external).

package up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// checkExternal checks --external: a list of client URLs, and none of the flags that
// configure the embedded broker it replaces.
func (o *Options) checkExternal(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("external") {
		return nil
	}
	if o.Open {
		return cmdutil.FlagErrorf("--external and --open exclude each other: a server from cotal broker config trusts this project's operator")
	}
	for _, f := range []string{"server", "store-dir", "cluster-name", "cluster-listen", "routes", "tls-cert", "tls-key", "cluster-tls", "insecure-no-tls"} {
		if cmd.Flags().Changed(f) {
			return cmdutil.FlagErrorf("--%s configures the embedded broker, which --external does not start: set it in cotal broker config", f)
		}
	}
	urls, err := externalURLs(o.External)
	if err != nil {
		return cmdutil.FlagErrorf("--external: %v", err)
	}
	o.External = strings.Join(urls, ",")
	return nil
}

// externalURLs reads a comma-separated list of client URLs (nats://, tls:// or
// nats+tls://, each with a host and a port).
func externalURLs(list string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if err := cmdutil.CheckServerURLs(raw); err != nil {
			return nil, err
		}
		u, err := url.Parse(client.ServerURL(raw))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			return nil, fmt.Errorf("%q is not a nats://, tls:// or nats+tls://host:port URL", raw)
		}
		if _, p, err := net.SplitHostPort(u.Host); err != nil || p == "" {
			return nil, fmt.Errorf("%q needs a port, e.g. nats://10.0.0.2:4222", raw)
		}
		out = append(out, u.String())
	}
	if len(out) == 0 {
		return nil, errors.New("want the client URL of the server, e.g. nats://10.0.0.2:4222 (several: comma-separated)")
	}
	return out, nil
}

// serveExternal serves the project's spaces on an external nats-server that trusts the
// project's operator (cotal broker config): it pushes every account of the chain to the
// server's resolver, provisions every space, records the mesh and supervises the daemons
// until ctx ends. It starts no broker.
func serveExternal(ctx context.Context, opts *Options, proj *workspace.Project, space string) error {
	chain, err := trust.Open(proj.AuthDir())
	if err != nil {
		return err
	}
	if _, err := chain.Space(space); err != nil {
		return err
	}
	spaces := []string{space}
	known, err := chain.Spaces()
	if err != nil {
		return err
	}
	for _, s := range known {
		if s != space {
			spaces = append(spaces, s)
		}
	}
	if _, err := opts.applyLimits(chain, space, spaces, opts.IO.ErrOut); err != nil {
		return err
	}
	if err := pushAccounts(ctx, chain, opts.External, opts.TLSCA); err != nil {
		return err
	}
	if err := opts.restoreSpaces(ctx, chain, opts.External, opts.TLSCA); err != nil {
		return err
	}
	for _, s := range spaces {
		// An external cluster may still be electing the new streams' leaders.
		if err := provisionClustered(ctx, opts.IO.ErrOut, chain, proj, opts.External, opts.TLSCA, s, opts.Replicas, nil); err != nil {
			return err
		}
	}
	if err := applyManifest(ctx, opts, chain, proj, opts.External); err != nil {
		return err
	}
	return supervise(ctx, opts, proj, chain, served{space: space, spaces: spaces, url: opts.External,
		note: ", external broker", ready: opts.External})
}

// pushAccounts hands every account of chain (but the system account, which the server's
// configuration names) to the resolver of the server at url, as the system account.
func pushAccounts(ctx context.Context, chain *trust.Chain, url, ca string) error {
	jwts, err := chain.AccountJWTs()
	if err != nil {
		return err
	}
	sysCreds, err := chain.SystemCreds(time.Hour)
	if err != nil {
		return err
	}
	sys, err := cmdutil.DialCreds(url, sysCreds, ca, "")
	if errors.Is(err, nats.ErrAuthorization) {
		return cmdutil.Refuse("to serve the project's spaces on "+url,
			"the server refused the project's system account: it does not trust this project's operator; start it from the configuration `cotal broker config --out nats.conf` writes", "")
	}
	if err != nil {
		return err
	}
	defer sys.Close()
	keys := make([]string, 0, len(jwts))
	for k := range jwts {
		if k != chain.SystemAccount() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := trust.PushAccount(ctx, sys, jwts[k]); err != nil {
			return fmt.Errorf("account %s: %w", k, err)
		}
	}
	return nil
}
