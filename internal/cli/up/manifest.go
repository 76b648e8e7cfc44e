package up

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/client"
	"github.com/cotal-ai/cotal/internal/atomicfile"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/trust"
	"github.com/cotal-ai/cotal/workspace"
)

// readManifest loads -f and lets it decide the space, the mode and the listen URL, refusing
// flags that contradict it.
func (o *Options) readManifest() error {
	// Stat before the manifest is opened: opening a named pipe waits for a writer.
	if err := (cmdutil.UserFile{Flag: "-f", Path: o.File, Kind: "a team manifest (cotal.yaml)", Max: cmdutil.MaxManifestFileSize}).CheckStat(); err != nil {
		return err
	}
	m, err := workspace.LoadManifest(o.File)
	if err != nil {
		return err
	}
	if o.Space != "" && o.Space != m.Space {
		return cmdutil.FlagErrorf("--space %s contradicts space %s in %s: drop --space", o.Space, m.Space, o.File)
	}
	o.Space = m.Space
	open, err := cmdutil.ManifestMode(m, o.File, o.Limits != (trust.Limits{}))
	if err != nil {
		return err
	}
	if !open && o.Open {
		return cmdutil.FlagErrorf("--open contradicts the authenticated broker of %s: drop --open or set broker.auth: false", o.File)
	}
	o.Open = open
	if o.Server == "" && len(m.Broker.Servers) > 0 {
		o.Server = m.Broker.Servers[0]
		if _, _, err := listenAddr(o.Server); err != nil {
			return fmt.Errorf("%s: broker.servers: %w", o.File, err)
		}
	}
	if h := m.Broker.Host; h != "" && o.Server != "" {
		if host, _, err := listenAddr(o.Server); err == nil && host != h {
			return cmdutil.FlagErrorf("broker.host %s in %s contradicts %s (from --server or broker.servers): give the listen host in one place", h, o.File, o.Server)
		}
	}
	o.manifest = m
	return nil
}

// access is the least-privilege access of every manifest agent, with persona grants when
// the manifest asks for them.
func (o *Options) access() (map[string]workspace.AgentAccess, error) {
	personas, err := o.manifest.LoadPersonas()
	if err != nil {
		return nil, err
	}
	return o.manifest.AccessWith(personas), nil
}

// channelConfig is a manifest channel's registry entry.
func channelConfig(c workspace.ManifestChannel) client.ChannelConfig {
	return client.ChannelConfig{Replay: c.Replay, ReplayWindow: c.ReplayWindow, DeliveryClass: c.DeliveryClass,
		Description: c.Description, Instructions: c.Instructions}
}

// printPlan says what -f would create, and creates nothing.
func printPlan(o *Options, proj *workspace.Project) error {
	acc, err := o.access()
	if err != nil {
		return err
	}
	m, out := o.manifest, o.IO.Out
	server := o.Server
	if server == "" {
		server = "loopback, 4222 or a free port"
	}
	fmt.Fprintf(out, "cotal up -f %s --dry-run: nothing is created\n", o.File)
	fmt.Fprintf(out, "space    %s (%s, %s)\n", m.Space, modeName(o.mode()), server)
	for _, c := range m.Channels {
		fmt.Fprintf(out, "channel  #%s  read: %s  post: %s", c.Name, list(c.Readers()), list(c.AllowPublish))
		if c.DeliveryClass != "" {
			fmt.Fprintf(out, "  (%s)", c.DeliveryClass)
		}
		fmt.Fprintln(out)
	}
	for _, a := range m.Agents {
		x := acc[a.Name]
		fmt.Fprintf(out, "agent    %s", a.Name)
		if x.Role != "" {
			fmt.Fprintf(out, "  role=%s", x.Role)
		}
		fmt.Fprintf(out, "  joins: %s  reads: %s  posts: %s", list(x.Subscribe), list(x.AllowSubscribe), list(x.AllowPublish))
		if !o.Open {
			fmt.Fprintf(out, "  creds: %s", cmdutil.CredsPath(proj, m.Space, a.Name))
		}
		fmt.Fprintln(out)
	}
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
}

// applyManifest makes the running space what -f says: the channel registry (defaults and
// every declared channel), and on an authenticated mesh one least-privilege credential per
// agent in .cotal/auth/creds/space.<hex>/<agent>.creds with its bind-only durables and its
// read ACL row (cmdutil.RecordReadACL).
func applyManifest(ctx context.Context, o *Options, chain *trust.Chain, proj *workspace.Project, server string) error {
	m := o.manifest
	if m == nil {
		return nil
	}
	acc, err := o.access()
	if err != nil {
		return err
	}
	var creds []byte
	var acct *trust.Account
	if chain != nil {
		if acct, err = chain.Space(m.Space); err != nil {
			return err
		}
		if creds, err = acct.Mint(trust.UserSpec{Name: "cotal up", Profile: trust.ProfileProvisioner,
			Principal: protocol.Principal{Owner: protocol.OwnerLocal, Actor: "cotal_up"}, ExpiresIn: time.Hour}); err != nil {
			return err
		}
	}
	nc, err := cmdutil.DialCreds(server, creds, o.TLSCA, "")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream on %s: %w", server, err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketChannels(m.Space))
	if err != nil {
		return fmt.Errorf("channel registry of %s: %w", m.Space, err)
	}
	if d := m.Defaults; d.Replay != nil || d.ReplayWindow != "" || d.DeliveryClass != "" {
		if err := putJSON(ctx, kv, protocol.ChannelDefaultsKey, client.ChannelConfig{Replay: d.Replay, ReplayWindow: d.ReplayWindow, DeliveryClass: d.DeliveryClass}); err != nil {
			return err
		}
	}
	for _, c := range m.Channels {
		if err := putJSON(ctx, kv, c.Name, channelConfig(c)); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.IO.ErrOut, "✓ %s: %s in the registry of %s\n", o.File, cmdutil.Count(len(m.Channels), "channel"), m.Space)
	if acct == nil {
		return nil
	}
	dir := proj.CredsDir(m.Space)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creds folder: %w", err)
	}
	for _, a := range m.Agents {
		x := acc[a.Name]
		p := protocol.Principal{Owner: protocol.OwnerLocal, Actor: a.Name}
		uid, err := chain.Identity(m.Space, a.Name)
		if err != nil {
			return err
		}
		if _, err := provision.Agent(ctx, js, m.Space, p, uid, x.Role); err != nil {
			return err
		}
		b, err := acct.Mint(trust.UserSpec{Name: a.Name, Profile: trust.ProfileAgent, Principal: p, LifecycleUID: uid, Role: x.Role,
			Subscribe: x.Subscribe, AllowSubscribe: x.AllowSubscribe, AllowPublish: x.AllowPublish})
		if err != nil {
			return fmt.Errorf("%s: agent %s: %w", o.File, a.Name, err)
		}
		if err := cmdutil.RecordReadACL(ctx, js, m.Space, b); err != nil {
			return err
		}
		path := filepath.Join(dir, a.Name+".creds")
		if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.ErrOut, "→ wrote %s\n", path)
	}
	return nil
}

func putJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("channel registry %q: %w", key, err)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("channel registry %q: %w", key, err)
	}
	return nil
}
