package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/spacehost"
)

// Config is one delivery process: the lane of one space (Space), or a host of one lane per
// space of a space manifest (Spaces). It is delivery's counterpart of authsvc.Config.
type Config struct {
	Server string // broker URL; required
	TLSCA  string // CA file (PEM) the broker's TLS certificate is checked against; "" means the system's roots
	Space  string // one space; exclusive with Spaces
	// Spaces is the path of a space manifest (see spacehost.ParseSpaceList): version 1, or
	// version 2 with entries holding "space" only. Its lanes start serve-what-you-can, and
	// a broker lost for the whole process (ErrBrokerGone) stops the host.
	Spaces string
	// Creds returns the daemon's credential (profile delivery) of space; required. A host
	// calls it for every attempt of a lane, so a credential that appears later is used at
	// the next attempt. Its error is returned (or, in a host, reported for the space) as
	// it is.
	Creds func(space string) ([]byte, error)
	// SystemCreds is an optional system-account credential for every lane's liveness
	// oracle (see Lane.SystemCreds).
	SystemCreds []byte
	// EvictCreds is an optional system-account credential that may KICK, for every lane's
	// evictions on the delivery-admin rail (see Lane.EvictCreds).
	EvictCreds []byte
	// WaitForLease makes the one space's lane wait for a held lease (see
	// Lane.WaitForLease); a host never waits.
	WaitForLease bool
	BrokerGone   time.Duration // how long the broker may be unreachable; 0 means 15 s
	Version      string        // the build serving, written in each lane's lease row (Lane.Version)
	Logger       *slog.Logger  // nil means discard; a host's lines are logged With("space", s) (see spacehost.PrefixHandler)
}

// check validates the configuration without I/O.
func (c *Config) check() error {
	switch {
	case c.Server == "":
		return errors.New("no broker URL")
	case (c.Space == "") == (c.Spaces == ""):
		return errors.New("name one space, or a space manifest, not both")
	case c.Space != "" && protocol.CheckSpace(c.Space) != nil:
		return protocol.CheckSpace(c.Space)
	case c.Creds == nil:
		return errors.New("no credential source")
	case c.WaitForLease && c.Spaces != "":
		return errors.New("a host's lanes do not wait for a held lease")
	case c.BrokerGone < 0:
		return fmt.Errorf("broker-gone window %s: want a positive duration", c.BrokerGone)
	}
	return nil
}

// Serve runs what cfg names until ctx ends, as authsvc.Serve does for the auth service:
// for one space, its lane (Lane.Run's errors: ErrLeaseHeld, ErrFenced, ErrBrokerGone, ...);
// for a manifest, a spacehost.Host of one lane per space. ready is called once: for one
// space when its lane serves, for a host once every space of the manifest opened or failed
// its first attempt (Ready names both). A host reads its manifest again on Reload (see
// spacehost.Host); reload is called with the host before it runs, so the caller can wire
// SIGHUP, and may be nil.
func Serve(ctx context.Context, cfg Config, ready func(spacehost.Ready), reload func(*spacehost.Host)) error {
	if err := cfg.check(); err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Space != "" {
		lane, err := cfg.lane(cfg.Space, log)
		if err != nil {
			return err
		}
		lane.WaitForLease = cfg.WaitForLease
		return lane.Run(ctx, func() {
			if ready != nil {
				ready(spacehost.Ready{Serving: []string{cfg.Space}})
			}
		})
	}
	h := &spacehost.Host{
		Manifest: cfg.Spaces,
		Policy:   spacehost.ServeWhatYouCan,
		Logger:   log,
		Fatal:    func(err error) bool { return errors.Is(err, ErrBrokerGone) },
		NewLane: func(e spacehost.Entry, laneLog *slog.Logger) (spacehost.Lane, error) {
			return cfg.lane(e.Space, laneLog)
		},
	}
	if reload != nil {
		reload(h)
	}
	return h.Run(ctx, ready)
}

// lane builds the lane of space with its credential.
func (c *Config) lane(space string, log *slog.Logger) (*Lane, error) {
	creds, err := c.Creds(space)
	if err != nil {
		return nil, err
	}
	return &Lane{Space: space, Server: c.Server, TLSCA: c.TLSCA, Creds: creds, SystemCreds: c.SystemCreds, EvictCreds: c.EvictCreds, Logger: log,
		BrokerGone: c.BrokerGone, Version: c.Version}, nil
}
