package authsvc

import (
	"errors"
	"flag"
	"fmt"

	"github.com/cotal-ai/cotal/callout"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/protocol"
)

// DefaultAuthTimeout is the default of --auth-timeout: the callout's bound on one
// authorization.
const DefaultAuthTimeout = callout.DefaultTimeout

// RegisterFlags registers the auth service's flags on fs, bound to c's fields, with their
// defaults: the one flag table of `cotal auth-service` (which adds fs to its command with
// pflag's AddGoFlagSet, then --pidfile) and of Run (which adds --trust). The flags:
//
//	--space S | --spaces MANIFEST [--callout-only]
//	--server URL --tls-ca FILE --port N --auth-timeout D (2s) --service-endpoints
//	--exchange-public-port N --exchange-public-url URL --exchange-trusted-proxy
//	--advertised-server URL --agent-provisioning-url URL
//
// CheckFlags refuses the combinations that make no sense.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Space, "space", "", "space to serve")
	fs.StringVar(&c.Server, "server", "", "NATS URL of the mesh")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "CA file (PEM) the mesh's TLS certificate is signed by")
	fs.StringVar(&c.Spaces, "spaces", "", "a space manifest (JSON): one lane per space")
	fs.BoolVar(&c.CalloutOnly, "callout-only", false, "with --spaces: run the callouts alone, all or none")
	fs.IntVar(&c.Port, "port", 0, "loopback port of the exchange (0: ephemeral)")
	fs.DurationVar(&c.AuthTimeout, "auth-timeout", DefaultAuthTimeout, "bound on one authorization")
	fs.IntVar(&c.Public.Port, string(exchange.SettingPort), 0, "serve the public face on 127.0.0.1:N, behind your HTTPS reverse proxy")
	fs.StringVar(&c.Public.URL, string(exchange.SettingURL), "", "the https:// URL the proxy serves the public face at (default http://127.0.0.1:N)")
	fs.BoolVar(&c.Public.TrustedProxy, string(exchange.SettingTrustedProxy), false, "key refusal limits on the last X-Forwarded-For hop (only behind your proxy)")
	fs.StringVar(&c.Public.AdvertisedServer, string(exchange.SettingAdvertisedServer), "", "the broker URL the discovery bundle names (nats:, tls:, ws: or wss:; default --server)")
	fs.StringVar(&c.Public.AgentProvisioningURL, string(exchange.SettingProvisioningURL), "", "the https:// agent provisioning URL the discovery bundle names")
	fs.BoolVar(&c.ServiceEndpoints, "service-endpoints", false, "register the callout as NATS micro service "+callout.ServiceName+" (nats micro ls)")
}

// CheckFlags refuses the flag combinations of RegisterFlags' table (and --pidfile) that make
// no sense, with an error naming the flag; set reports whether a flag was given. It does
// no I/O, and does not require what `cotal auth-service` finds in the project (--server,
// a space): Config's own check, in Serve, does.
func CheckFlags(c *Config, set func(name string) bool) error {
	if c.Space != "" || set("space") {
		if err := protocol.CheckSpace(c.Space); err != nil {
			return fmt.Errorf("--space: %w", err)
		}
	}
	if c.Spaces != "" {
		if set("space") {
			return errors.New("--space does not go with --spaces: the manifest names the spaces")
		}
		for _, name := range []string{"port", "pidfile", string(exchange.SettingPort), string(exchange.SettingURL),
			string(exchange.SettingTrustedProxy), string(exchange.SettingAdvertisedServer), string(exchange.SettingProvisioningURL)} {
			if set(name) {
				return fmt.Errorf("--%s does not go with --spaces: each lane binds its own ephemeral exchange port, and a manifest entry names its public face", name)
			}
		}
	} else if c.CalloutOnly {
		return errors.New("--callout-only needs --spaces <version 1 manifest>")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("--port %d: want 0 (ephemeral) to 65535", c.Port)
	}
	if err := c.Public.Check(); err != nil {
		var se *exchange.SettingError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: %s", se.Setting.Flag(), se.Msg)
		}
		return err
	}
	if c.AuthTimeout < 0 {
		return fmt.Errorf("--auth-timeout %s: want a positive duration", c.AuthTimeout)
	}
	return nil
}
