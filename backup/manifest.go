// Package backup writes, checks and restores a cotal backup archive: a tar file holding
// every stream of one or more spaces as JetStream's own snapshot (messages, sequences,
// headers and the durable consumers with their positions), the trust chain's public parts
// and, when asked, the chain itself with its seeds. A manifest names every member with its
// size and sha256, and a trailer the manifest's own sha256, so a corrupt or truncated
// archive is refused before anything is restored.
package backup

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// Format is the manifest's format name; Version its version.
const (
	Format  = "cotal-backup"
	Version = 1
)

// Archive member names: the manifest comes first, its checksum last.
const (
	ManifestName = "manifest.json"
	TrailerName  = "manifest.sha256"
	// ChainMember holds the trust chain with its seeds (trust.Export's archive), present
	// only in a backup made with the auth state.
	ChainMember = "auth/chain.tar"
)

// Bounds on what Open reads.
const (
	maxManifestSize = 4 << 20
	maxMembers      = 4096
)

// ErrCorrupt reports an archive that is not whole: truncated, a byte changed, a member
// missing, added or out of place. Nothing has been restored when it is returned.
var ErrCorrupt = errors.New("the backup archive is corrupt or truncated")

// Manifest describes an archive: what it holds and each member's checksum.
type Manifest struct {
	Format   string    `json:"format"`             // Format
	Version  int       `json:"version"`            // Version
	Created  time.Time `json:"created"`            // when the cut was taken
	Mode     string    `json:"mode"`               // "auth" or "open": how the mesh authenticated
	Operator string    `json:"operator,omitempty"` // the operator's public key (auth mode)
	Spaces   []Space   `json:"spaces"`             // the spaces backed up
	Members  []Member  `json:"members"`            // every member but the manifest and trailer, in archive order
}

// Space is one space of a backup.
type Space struct {
	Name     string   `json:"name"`
	Account  string   `json:"account,omitempty"` // the space account's public key (auth mode)
	Streams  []Stream `json:"streams"`           // the streams backed up
	Excluded []string `json:"excluded"`          // the space's streams left out: presence and leases, rebuilt live
}

// Stream is one stream's snapshot in an archive.
type Stream struct {
	Name      string `json:"name"`
	Member    string `json:"member"`    // the archive member with JetStream's snapshot
	Messages  uint64 `json:"messages"`  // at the cut
	Bytes     uint64 `json:"bytes"`     // at the cut
	FirstSeq  uint64 `json:"firstSeq"`  // at the cut
	LastSeq   uint64 `json:"lastSeq"`   // at the cut
	Consumers int    `json:"consumers"` // consumers in the snapshot, ephemeral ones too
	Durables  int    `json:"durables"`  // durable consumers at the cut (a restore keeps these)
}

// Member is one file of an archive.
type Member struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// Inventory splits a space's streams (provision.Streams) into those a backup holds and
// those it leaves out: the presence bucket (who is online now) and the delivery and
// manager leases (held by a running daemon), which the restored space rebuilds live.
func Inventory(space string) (keep []jetstream.StreamConfig, excluded []string) {
	skip := map[string]bool{
		"KV_" + protocol.BucketPresence(space): true,
		"KV_" + protocol.BucketDelivery(space): true,
		"KV_" + protocol.BucketManager(space):  true,
	}
	for _, c := range provision.Streams(space) {
		if skip[c.Name] {
			excluded = append(excluded, c.Name)
			continue
		}
		keep = append(keep, c)
	}
	return keep, excluded
}

// streamMember names the member holding a stream's snapshot.
func streamMember(space, stream string) string {
	return "streams/" + space + "/" + stream + ".snapshot"
}

var (
	memberName = regexp.MustCompile(`^(trust/[A-Za-z0-9_.-]{1,160}\.jwt|streams/[A-Za-z0-9_-]{1,64}/[A-Za-z0-9_-]{1,200}\.snapshot|auth/chain\.tar)$`)
	hexSum     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// check validates a manifest read from an archive: its format, every space name, each
// space's streams against the space's inventory (no stream it does not make, none twice),
// and the members (well-formed unique names and checksums, each stream's snapshot among
// them).
func (m *Manifest) check() error {
	if m.Format != Format {
		return fmt.Errorf("format %q: not a cotal backup (want %q)", m.Format, Format)
	}
	if m.Version != Version {
		return fmt.Errorf("version %d: this cotal reads version %d", m.Version, Version)
	}
	if m.Mode != "auth" && m.Mode != "open" {
		return fmt.Errorf("mode %q: want auth or open", m.Mode)
	}
	if len(m.Spaces) == 0 {
		return errors.New("no space")
	}
	if len(m.Members) > maxMembers {
		return fmt.Errorf("%d members: at most %d", len(m.Members), maxMembers)
	}
	members := map[string]bool{}
	for _, mb := range m.Members {
		if !memberName.MatchString(mb.Name) {
			return fmt.Errorf("member %q: not a name a backup writes", mb.Name)
		}
		if members[mb.Name] {
			return fmt.Errorf("member %q: listed twice", mb.Name)
		}
		if mb.Size < 0 || !hexSum.MatchString(mb.SHA256) {
			return fmt.Errorf("member %q: bad size or sha256", mb.Name)
		}
		members[mb.Name] = true
	}
	seen := map[string]bool{}
	for _, s := range m.Spaces {
		if err := protocol.CheckSpace(s.Name); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("space %q: listed twice", s.Name)
		}
		seen[s.Name] = true
		keep, _ := Inventory(s.Name)
		names := map[string]bool{}
		for _, st := range s.Streams {
			if !slices.ContainsFunc(keep, func(c jetstream.StreamConfig) bool { return c.Name == st.Name }) {
				return fmt.Errorf("space %q: stream %q is not one a space holds", s.Name, st.Name)
			}
			if names[st.Name] {
				return fmt.Errorf("space %q: stream %q listed twice", s.Name, st.Name)
			}
			names[st.Name] = true
			if st.Member != streamMember(s.Name, st.Name) || !members[st.Member] {
				return fmt.Errorf("space %q: stream %q: its snapshot member %q is missing", s.Name, st.Name, st.Member)
			}
		}
	}
	return nil
}

// HasChain reports whether the archive holds the trust chain with its seeds.
func (m *Manifest) HasChain() bool {
	return slices.ContainsFunc(m.Members, func(mb Member) bool { return mb.Name == ChainMember })
}

// SpaceNames lists the spaces of the archive in order.
func (m *Manifest) SpaceNames() []string {
	out := make([]string, len(m.Spaces))
	for i, s := range m.Spaces {
		out[i] = s.Name
	}
	return out
}
