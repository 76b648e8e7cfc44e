package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrExists reports an output file that is already there: a backup never writes over
// one unless asked to (Plan.Force).
var ErrExists = errors.New("the file already exists")

// ErrMissingStreams reports a space whose streams are not all there: it was never fully
// provisioned (or something deleted a stream), so a backup of it would not restore whole.
var ErrMissingStreams = errors.New("the space is missing streams")

// SpaceSource is one space to back up: a connection to its account that may use the
// JetStream API (a provisioner on an authenticated mesh), and the account's public
// key and JWT there ("" on an open mesh).
type SpaceSource struct {
	Name       string
	Conn       *nats.Conn
	Account    string
	AccountJWT string
}

// Plan is what Write backs up, and how.
type Plan struct {
	Spaces      []SpaceSource
	Mode        string // "auth" or "open"
	Operator    string // the operator's public key (auth mode)
	OperatorJWT string // the operator's JWT (auth mode)
	// Chain, when set, is the trust chain with its seeds (trust.Export's archive); the
	// archive then holds every secret of the mesh.
	Chain []byte
	Force bool             // replace an existing file
	Now   func() time.Time // the cut's time (nil: time.Now)
}

// staged is a member written to a temporary file before the archive is assembled.
type staged struct {
	Member
	path string // "" when data holds it
	data []byte
}

// Write backs up every space of p into a new archive at path, mode 0600. It refuses an
// existing path unless p.Force, and a space missing one of its streams
// (ErrMissingStreams), before writing anything. Each stream's snapshot is JetStream's own
// and consistent in itself; streams are cut one after another, so a cut of a quiet mesh
// (cotal down --preserve-state stops the daemons first) is consistent as a whole. The
// archive is written beside path and renamed into place, so path is never half-written.
func Write(ctx context.Context, path string, p Plan) (*Manifest, error) {
	if !p.Force {
		if _, err := os.Lstat(path); err == nil {
			return nil, fmt.Errorf("write backup %s: %w", path, ErrExists)
		}
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	m := &Manifest{Format: Format, Version: Version, Created: now().UTC(), Mode: p.Mode, Operator: p.Operator}
	// Check every space's stream set before cutting any.
	for _, s := range p.Spaces {
		if err := checkStreams(ctx, s); err != nil {
			return nil, err
		}
	}
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), ".cotal-backup-")
	if err != nil {
		return nil, fmt.Errorf("write backup %s: %w", path, err)
	}
	defer os.RemoveAll(tmpDir)

	var members []staged
	if p.OperatorJWT != "" {
		members = append(members, inMemory("trust/operator.jwt", []byte(p.OperatorJWT)))
	}
	for _, s := range p.Spaces {
		if s.AccountJWT != "" {
			members = append(members, inMemory("trust/account."+s.Name+".jwt", []byte(s.AccountJWT)))
		}
	}
	if p.Chain != nil {
		members = append(members, inMemory(ChainMember, p.Chain))
	}
	for _, s := range p.Spaces {
		keep, excluded := Inventory(s.Name)
		sp := Space{Name: s.Name, Account: s.Account, Excluded: excluded}
		for _, c := range keep {
			st, mb, err := cutStream(ctx, s, c.Name, tmpDir)
			if err != nil {
				return nil, fmt.Errorf("write backup %s: space %q: %w", path, s.Name, err)
			}
			members = append(members, mb)
			sp.Streams = append(sp.Streams, st)
		}
		m.Spaces = append(m.Spaces, sp)
	}
	for _, mb := range members {
		m.Members = append(m.Members, mb.Member)
	}
	if err := m.check(); err != nil { // what Open will check
		return nil, fmt.Errorf("write backup %s: %w", path, err)
	}
	if err := assemble(path, tmpDir, m, members, p.Force); err != nil {
		return nil, fmt.Errorf("write backup %s: %w", path, err)
	}
	return m, nil
}

// checkStreams refuses a space missing one of the streams it should hold.
func checkStreams(ctx context.Context, s SpaceSource) error {
	js, err := jetstream.New(s.Conn)
	if err != nil {
		return fmt.Errorf("space %q: %w", s.Name, err)
	}
	have := map[string]bool{}
	names := js.StreamNames(ctx)
	for n := range names.Name() {
		have[n] = true
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("space %q: list streams: %w", s.Name, err)
	}
	keep, _ := Inventory(s.Name)
	var missing []string
	for _, c := range keep {
		if !have[c.Name] {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("space %q: %w: %v; run cotal up --space %s to provision them, then back up again", s.Name, ErrMissingStreams, missing, s.Name)
	}
	return nil
}

func inMemory(name string, data []byte) staged {
	sum := sha256.Sum256(data)
	return staged{Member: Member{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, data: data}
}

// cutStream snapshots one stream into a file of dir.
func cutStream(ctx context.Context, s SpaceSource, stream, dir string) (Stream, staged, error) {
	name := streamMember(s.Name, stream)
	f, err := os.CreateTemp(dir, "stream-")
	if err != nil {
		return Stream{}, staged{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	st, err := snapshot(ctx, s.Conn, stream, cw)
	if err != nil {
		return Stream{}, staged{}, err
	}
	if err := f.Close(); err != nil {
		return Stream{}, staged{}, err
	}
	durables, err := countDurables(ctx, s.Conn, stream)
	if err != nil {
		return Stream{}, staged{}, err
	}
	mb := staged{Member: Member{Name: name, Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, path: f.Name()}
	return Stream{Name: stream, Member: name, Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq,
		LastSeq: st.LastSeq, Consumers: st.Consumers, Durables: durables}, mb, nil
}

// countDurables counts the durable consumers of stream.
func countDurables(ctx context.Context, nc *nats.Conn, stream string) (int, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	n := 0
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		if ci.Config.Durable != "" {
			n++
		}
	}
	if err := list.Err(); err != nil {
		return 0, fmt.Errorf("stream %s: list consumers: %w", stream, err)
	}
	return n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// assemble writes the tar (manifest, members, trailer) to a temporary file of dir, mode
// 0600, synced, then moves it to path: with force over what is there, else only when
// nothing is (a link, so a file made meanwhile is never replaced).
func assemble(path, dir string, m *Manifest, members []staged, force bool) error {
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "archive-")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	add := func(name string, size int64, r io.Reader) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: m.Created}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(ManifestName, int64(len(manifest)), bytes.NewReader(manifest)); err != nil {
		return err
	}
	for _, mb := range slices.Clone(members) {
		r := io.Reader(bytes.NewReader(mb.data))
		if mb.path != "" {
			sf, err := os.Open(mb.path)
			if err != nil {
				return err
			}
			defer sf.Close()
			r = sf
		}
		if err := add(mb.Name, mb.Size, r); err != nil {
			return fmt.Errorf("member %s: %w", mb.Name, err)
		}
	}
	sum := sha256.Sum256(manifest)
	trailer := []byte(hex.EncodeToString(sum[:]) + "\n")
	if err := add(TrailerName, int64(len(trailer)), bytes.NewReader(trailer)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if force {
		return os.Rename(f.Name(), path)
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		return err
	}
	return nil
}
