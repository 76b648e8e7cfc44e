package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/internal/strictjson"
)

// ErrLiveSpace reports a restore into a broker that already holds one of the space's
// streams: a restore never writes over stored data.
var ErrLiveSpace = errors.New("the space already has data on this broker")

// Archive is a backup archive Open checked whole.
type Archive struct {
	Path     string
	Manifest *Manifest
}

// Open reads the archive at path from end to end and checks it: the manifest first, each
// member in the manifest's order with its size and sha256, the trailer with the manifest's
// own sha256, and nothing after. Anything else (a truncated file, a flipped byte, a member
// missing or added) is refused with an error wrapping ErrCorrupt, having written nothing.
// A path that is not a regular file is refused unopened: opening a named pipe would wait
// for a writer.
func Open(path string) (*Archive, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open backup %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open backup: %w", err)
	}
	defer f.Close()
	m, err := verify(f)
	if err == nil {
		err = checkEnd(f)
	}
	if err != nil {
		return nil, fmt.Errorf("open backup %s: %w", path, err)
	}
	return &Archive{Path: path, Manifest: m}, nil
}

// tarEnd is the size of the end-of-archive marker: two zero blocks.
const tarEnd = 1024

// checkEnd requires the archive to end with tar's end marker, which a reader otherwise
// forgives: a file cut just before it is truncated all the same.
func checkEnd(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < tarEnd {
		return corrupt("%d bytes: too short", fi.Size())
	}
	end := make([]byte, tarEnd)
	if _, err := f.ReadAt(end, fi.Size()-tarEnd); err != nil {
		return corrupt("reading its end: %v", err)
	}
	if !bytes.Equal(end, make([]byte, tarEnd)) {
		return corrupt("it ends without tar's end marker")
	}
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// next reads the next tar header, which must be a regular file named name.
func next(tr *tar.Reader, name string) (*tar.Header, error) {
	hdr, err := tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, corrupt("it ends before %s", name)
	}
	if err != nil {
		return nil, corrupt("reading %s: %v", name, err)
	}
	if hdr.Name != name || hdr.Typeflag != tar.TypeReg {
		return nil, corrupt("found %q where %s belongs", hdr.Name, name)
	}
	return hdr, nil
}

func verify(r io.Reader) (*Manifest, error) {
	tr := tar.NewReader(r)
	hdr, err := next(tr, ManifestName)
	if err != nil {
		return nil, err
	}
	if hdr.Size > maxManifestSize {
		return nil, corrupt("%s of %d bytes: at most %d", ManifestName, hdr.Size, maxManifestSize)
	}
	raw, err := io.ReadAll(tr)
	if err != nil || int64(len(raw)) != hdr.Size {
		return nil, corrupt("reading %s: %v", ManifestName, err)
	}
	var m Manifest
	if err := strictjson.Decode(raw, &m); err != nil {
		return nil, corrupt("%s: %v", ManifestName, err)
	}
	if err := m.check(); err != nil {
		return nil, corrupt("%s: %v", ManifestName, err)
	}
	for _, mb := range m.Members {
		hdr, err := next(tr, mb.Name)
		if err != nil {
			return nil, err
		}
		if hdr.Size != mb.Size {
			return nil, corrupt("%s holds %d bytes, the manifest says %d", mb.Name, hdr.Size, mb.Size)
		}
		h := sha256.New()
		n, err := io.Copy(h, tr)
		if err != nil || n != mb.Size {
			return nil, corrupt("reading %s: %d of %d bytes: %v", mb.Name, n, mb.Size, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != mb.SHA256 {
			return nil, corrupt("%s: sha256 %s, the manifest says %s", mb.Name, got, mb.SHA256)
		}
	}
	if _, err := next(tr, TrailerName); err != nil {
		return nil, err
	}
	trailer, err := io.ReadAll(io.LimitReader(tr, 128))
	if err != nil {
		return nil, corrupt("reading %s: %v", TrailerName, err)
	}
	sum := sha256.Sum256(raw)
	if strings.TrimSpace(string(trailer)) != hex.EncodeToString(sum[:]) {
		return nil, corrupt("the manifest's sha256 is not the one %s records", TrailerName)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return nil, corrupt("something follows %s", TrailerName)
	}
	return &m, nil
}

// ReadMember returns the whole content of a small member (a JWT, the chain archive),
// checked against the manifest again.
func (a *Archive) ReadMember(name string) ([]byte, error) {
	var out []byte
	err := a.member(name, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		out = b
		return err
	})
	return out, err
}

// member calls fn with a reader of member name that fails at its end when the bytes
// differ from the manifest's sha256 (the file changed since Open).
func (a *Archive) member(name string, fn func(io.Reader) error) error {
	var want *Member
	for i := range a.Manifest.Members {
		if a.Manifest.Members[i].Name == name {
			want = &a.Manifest.Members[i]
		}
	}
	if want == nil {
		return fmt.Errorf("backup %s: no member %s", a.Path, name)
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return fmt.Errorf("backup %s: %w", a.Path, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return fmt.Errorf("backup %s: %w", a.Path, corrupt("%s: %v", name, err))
		}
		if hdr.Name == name {
			return fn(&checkedReader{r: io.LimitReader(tr, want.Size), h: sha256.New(), want: want})
		}
	}
}

// checkedReader hashes what it reads and fails at EOF on a size or sha256 mismatch.
type checkedReader struct {
	r io.Reader
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n    int64
	want *Member
}

func (c *checkedReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.h.Write(b[:n])
	c.n += int64(n)
	if errors.Is(err, io.EOF) {
		if c.n != c.want.Size || hex.EncodeToString(c.h.Sum(nil)) != c.want.SHA256 {
			return n, corrupt("%s changed since it was checked", c.want.Name)
		}
	}
	return n, err
}

// Restored is what Restore put back of one space.
type Restored struct {
	Space   string
	Streams []Stream // each as the broker reported it after the restore
}

// CheckFresh refuses, with an error wrapping ErrLiveSpace, when the account nc is
// connected to already holds one of the streams space's backup would restore.
func (a *Archive) CheckFresh(ctx context.Context, nc *nats.Conn, space string) error {
	sp, err := a.space(space)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	names := js.StreamNames(ctx)
	for n := range names.Name() {
		have[n] = true
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("restore space %q: list streams: %w", space, err)
	}
	var live []string
	for _, st := range sp.Streams {
		if have[st.Name] {
			live = append(live, st.Name)
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("restore space %q: %w (%s)", space, ErrLiveSpace, strings.Join(live, ", "))
	}
	return nil
}

func (a *Archive) space(name string) (*Space, error) {
	for i := range a.Manifest.Spaces {
		if a.Manifest.Spaces[i].Name == name {
			return &a.Manifest.Spaces[i], nil
		}
	}
	return nil, fmt.Errorf("backup %s holds no space %q (it holds %s)", a.Path, name, strings.Join(a.Manifest.SpaceNames(), ", "))
}

// Restore recreates every stream of space from the archive on the account nc is
// connected to, each with the config the space makes today (provision.Streams, one
// replica) and its messages, sequences, headers and consumers from the snapshot, and checks
// each comes back with the messages, sequences and consumers the manifest records, and
// that each durable an agent binds or reads is the one its name stands for (else
// ErrUnsafeConsumer, and the streams it restored are removed again). It first
// refuses (ErrLiveSpace) when one of them already exists, changing nothing. A stream
// whose snapshot fails its checksum on the way is not created.
func (a *Archive) Restore(ctx context.Context, nc *nats.Conn, space string) (Restored, error) {
	if err := a.CheckFresh(ctx, nc, space); err != nil {
		return Restored{}, err
	}
	sp, _ := a.space(space)
	keep, _ := Inventory(space)
	cfgs := map[string]jetstream.StreamConfig{}
	for _, c := range keep {
		cfgs[c.Name] = c
	}
	out := Restored{Space: space}
	for _, st := range sp.Streams {
		var got streamState
		err := a.member(st.Member, func(r io.Reader) error {
			var err error
			got, err = restoreStream(ctx, nc, cfgs[st.Name], r)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("restore space %q: %w", space, err)
		}
		back := Stream{Name: st.Name, Member: st.Member, Messages: got.Msgs, Bytes: got.Bytes,
			FirstSeq: got.FirstSeq, LastSeq: got.LastSeq, Consumers: got.Consumers}
		if back.Messages != st.Messages || back.LastSeq != st.LastSeq || back.Consumers != st.Consumers ||
			(st.Messages > 0 && back.FirstSeq != st.FirstSeq) {
			return out, fmt.Errorf("restore space %q: stream %s came back with %d messages (seq %d-%d) and %d consumers, the backup holds %d (seq %d-%d) and %d",
				space, st.Name, back.Messages, back.FirstSeq, back.LastSeq, back.Consumers, st.Messages, st.FirstSeq, st.LastSeq, st.Consumers)
		}
		out.Streams = append(out.Streams, back)
		if back.Durables, err = dropEphemerals(ctx, nc, st.Name); err != nil {
			return out, fmt.Errorf("restore space %q: %w", space, err)
		}
		out.Streams[len(out.Streams)-1].Durables = back.Durables
		if err := checkDurables(ctx, nc, space, st.Name); err != nil {
			return out, errors.Join(fmt.Errorf("restore space %q: %w", space, err), undo(ctx, nc, out.Streams))
		}
	}
	return out, nil
}

// undo deletes the streams a refused restore made, so the space is left as it was found:
// without them.
func undo(ctx context.Context, nc *nats.Conn, made []Stream) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range made {
		if err := js.DeleteStream(ctx, st.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("remove restored stream %s: %w", st.Name, err))
		}
	}
	return errors.Join(errs...)
}

// dropEphemerals deletes the ephemeral consumers a snapshot carried (a reader that was
// connected at the cut, which no one will resume) and counts the durables kept.
func dropEphemerals(ctx context.Context, nc *nats.Conn, stream string) (int, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	var ephemeral []string
	durables := 0
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		if ci.Config.Durable == "" {
			ephemeral = append(ephemeral, ci.Name)
		} else {
			durables++
		}
	}
	if err := list.Err(); err != nil {
		return 0, fmt.Errorf("stream %s: list consumers: %w", stream, err)
	}
	for _, name := range ephemeral {
		if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return 0, fmt.Errorf("stream %s: drop ephemeral consumer %s: %w", stream, name, err)
		}
	}
	return durables, nil
}

// Summary is a one-line account of a manifest, for people.
func (m *Manifest) Summary() string {
	var b bytes.Buffer
	msgs, streams := uint64(0), 0
	for _, s := range m.Spaces {
		streams += len(s.Streams)
		for _, st := range s.Streams {
			msgs += st.Messages
		}
	}
	fmt.Fprintf(&b, "%d space(s) (%s), %d streams, %d messages, cut %s", len(m.Spaces), strings.Join(m.SpaceNames(), ", "), streams, msgs, m.Created.Format("2006-01-02 15:04:05 UTC"))
	if m.HasChain() {
		b.WriteString(", with the trust chain's seeds")
	}
	return b.String()
}
