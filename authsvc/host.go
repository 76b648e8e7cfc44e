package authsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cotal-ai/cotal/bearer"
	"github.com/cotal-ai/cotal/exchange"
	"github.com/cotal-ai/cotal/internal/strictjson"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/spacehost"
	"github.com/cotal-ai/cotal/trust"
)

// Config is one auth service process: the lane of one space (Space), or a host of one lane
// per space of a manifest (Spaces).
type Config struct {
	TrustDir string // the broker's trust folder (.cotal/auth); required
	Server   string // broker URL; required
	TLSCA    string // CA file (PEM) the broker's TLS certificate is checked against; "" means the system's roots
	Space    string // one space; exclusive with Spaces
	// Spaces is the path of a space manifest (see spacehost.ParseSpaceList): version 2
	// entries may name a public face (ParseEntry). Its lanes start serve-what-you-can;
	// with CalloutOnly they run the callout alone and start all-or-none.
	Spaces      string
	CalloutOnly bool
	// Port is the loopback exchange's port of the one space; 0 means ephemeral. A host's
	// lanes always bind ephemeral ports, recorded in each space's auth-service.json.
	Port int
	// AuthTimeout bounds one authorization; 0 means the callout's default
	// (DefaultAuthTimeout, also the flag's default).
	AuthTimeout      time.Duration
	ServiceEndpoints bool // register each callout as the NATS micro service callout.ServiceName
	// Public is the public face of the one space (zero Port: none); a host's entries name
	// their own.
	Public exchange.PublicFace
	Store  bearer.Store // nil means files in TrustDir
	Logger *slog.Logger // nil means discard; a host prefixes each lane's lines with [<space>]
}

// check validates the configuration without I/O.
func (c *Config) check() error {
	switch {
	case c.TrustDir == "":
		return errors.New("no trust folder")
	case c.Server == "":
		return errors.New("no broker URL")
	case (c.Space == "") == (c.Spaces == ""):
		return errors.New("name one space, or a space manifest, not both")
	case c.Spaces != "" && (c.Port != 0 || c.Public != exchange.PublicFace{}):
		return errors.New("a host's lanes bind ephemeral exchange ports; public faces are manifest entries")
	case c.CalloutOnly && c.Spaces == "":
		return errors.New("callout-only runs a host: name a space manifest")
	case c.Space != "" && protocol.CheckSpace(c.Space) != nil:
		return protocol.CheckSpace(c.Space)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("port %d: want 0 (ephemeral) to 65535", c.Port)
	case c.AuthTimeout < 0:
		return fmt.Errorf("auth timeout %s: want a positive duration, or 0 for the default", c.AuthTimeout)
	}
	return c.Public.Check()
}

// Serve runs what cfg names until ctx ends. ready is called once: for one space when its
// lane serves, for a host once every space of the manifest opened or failed its first
// attempt (Ready names both). A host reads its manifest again on Reload (see
// spacehost.Host); reload is called with the host so the caller can wire SIGHUP, and is
// nil-safe.
func Serve(ctx context.Context, cfg Config, ready func(spacehost.Ready), reload func(*spacehost.Host)) error {
	if err := cfg.check(); err != nil {
		return fmt.Errorf("auth service: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	chain, err := trust.Open(cfg.TrustDir)
	if err != nil {
		return err
	}
	if cfg.Space != "" {
		lane, err := cfg.lane(chain, cfg.Space, cfg.Public, log)
		if err != nil {
			return err
		}
		lane.Port = cfg.Port
		return lane.Run(ctx, func() {
			if ready != nil {
				ready(spacehost.Ready{Serving: []string{cfg.Space}})
			}
		})
	}
	h := &spacehost.Host{
		Manifest: cfg.Spaces,
		Policy:   spacehost.ServeWhatYouCan,
		Settings: ParseEntry,
		Logger:   log,
		NewLane: func(e spacehost.Entry, laneLog *slog.Logger) (spacehost.Lane, error) {
			var pub exchange.PublicFace
			if s, ok := e.Settings.(EntrySettings); ok {
				pub = s.Public
			}
			return cfg.lane(chain, e.Space, pub, laneLog)
		},
	}
	if cfg.CalloutOnly {
		h.Policy, h.Settings = spacehost.AllOrNone, nil
	}
	if reload != nil {
		reload(h)
	}
	return h.Run(ctx, ready)
}

// lane builds the lane of space from its IdP pin.
func (c *Config) lane(chain *trust.Chain, space string, pub exchange.PublicFace, log *slog.Logger) (*Lane, error) {
	pin, err := ReadPin(chain.Dir(), space)
	if err != nil {
		return nil, err
	}
	l := &Lane{Space: space, Server: c.Server, TLSCA: c.TLSCA, Chain: chain, Store: c.Store,
		IdP: pin.Verifier(), IdPIssuer: pin.Issuer, IdPClientID: pin.AudienceName(), IdPURL: pin.LoginURL(),
		AuthTimeout: c.AuthTimeout, ServiceEndpoints: c.ServiceEndpoints, CalloutOnly: c.CalloutOnly, Logger: log}
	if pub.Port > 0 {
		l.Public = &pub
	}
	return l, nil
}

// EntrySettings are the settings of one version 2 manifest entry of an auth-service host.
type EntrySettings struct {
	Public exchange.PublicFace // zero Port: no public face
}

// Ports implements spacehost.PortUser: the public face's port, if any.
func (s EntrySettings) Ports() []int {
	if s.Public.Port > 0 {
		return []int{s.Public.Port}
	}
	return nil
}

// ParseEntry parses one version 2 manifest entry of an auth-service host:
// {"space", "exchangePublicPort"?, "exchangePublicUrl"?, "exchangeTrustedProxy"?,
// "advertisedServer"?, "agentProvisioningUrl"?}, under the rules of the flags they replace
// (exchange.PublicFace.Check); an error names the entry's key. Unknown keys refuse.
func ParseEntry(raw json.RawMessage) (any, error) {
	var e struct {
		Space                string `json:"space"`
		ExchangePublicPort   int    `json:"exchangePublicPort"`
		ExchangePublicURL    string `json:"exchangePublicUrl"`
		ExchangeTrustedProxy bool   `json:"exchangeTrustedProxy"`
		AdvertisedServer     string `json:"advertisedServer"`
		AgentProvisioningURL string `json:"agentProvisioningUrl"`
	}
	if err := strictjson.Decode(raw, &e); err != nil {
		return nil, err
	}
	pub := exchange.PublicFace{Port: e.ExchangePublicPort, URL: e.ExchangePublicURL, TrustedProxy: e.ExchangeTrustedProxy,
		AdvertisedServer: e.AdvertisedServer, AgentProvisioningURL: e.AgentProvisioningURL}
	if err := pub.Check(); err != nil {
		var se *exchange.SettingError
		if errors.As(err, &se) {
			msg := strings.ReplaceAll(se.Msg, exchange.SettingPort.Flag(), exchange.SettingPort.ManifestKey())
			return nil, fmt.Errorf("%s: %s", se.Setting.ManifestKey(), msg)
		}
		return nil, err
	}
	return EntrySettings{Public: pub}, nil
}
