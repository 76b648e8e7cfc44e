package backup_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/backup"
	"github.com/cotal-ai/cotal/claims"
	"github.com/cotal-ai/cotal/internal/meshtest"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
	"github.com/cotal-ai/cotal/taskboard"
)

const space = "team"

var (
	alice = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "alice"}
	bob   = protocol.Principal{Owner: protocol.OwnerLocal, Actor: "bob"}
)

// seed stores what a team leaves behind: channel posts with headers, DMs to bob of which
// his durable has taken and acknowledged the first (a position), a task on the board and a
// file claim.
func seed(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx := t.Context()
	if _, err := provision.Agent(ctx, js, space, bob, "u1aaaaaaaaaaaaaaaaaaaaaaaaaa", "builder"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := nats.NewMsg(protocol.ChatSubject(space, alice, "general"))
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("post-%d", i))
		m.Header.Set("X-Test", "é\x00\xff")
		m.Data = []byte(fmt.Sprintf(`{"text":"post %d","bin":"\u0000"}`, i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, protocol.InstSubject(space, bob, alice), []byte(fmt.Sprintf("dm %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	cons := dmConsumer(t, js)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range []struct{ bucket, key, val string }{
		{taskboard.Bucket(space), "task.t1", `{"id":"t1","title":"ship it"}`},
		{claims.Bucket(space), "local.alice.x", `{"path":"main.go"}`},
	} {
		b, err := js.KeyValue(ctx, kv.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, kv.key, []byte(kv.val)); err != nil {
			t.Fatal(err)
		}
	}
}

func dmConsumer(t *testing.T, js jetstream.JetStream) jetstream.Consumer {
	t.Helper()
	s, err := js.Stream(t.Context(), protocol.StreamDM(space))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for ci := range s.ListConsumers(t.Context()).Info() {
		names = append(names, ci.Name)
	}
	if len(names) != 1 {
		t.Fatalf("DM durables %v, want bob's one", names)
	}
	c, err := s.Consumer(t.Context(), names[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stored is one message as the stream holds it.
type stored struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Data    []byte
}

// consumerState is a durable and where it stands.
type consumerState struct {
	Name              string
	Filter            string
	Delivered, AckFlr uint64
	Pending           uint64
}

// dump reads every stream a backup holds, message by message, and its consumers.
func dump(t *testing.T, js jetstream.JetStream) (map[string][]stored, map[string][]consumerState) {
	t.Helper()
	ctx := t.Context()
	msgs, cons := map[string][]stored{}, map[string][]consumerState{}
	keep, _ := backup.Inventory(space)
	for _, c := range keep {
		s, err := js.Stream(ctx, c.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", c.Name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("%s seq %d: %v", c.Name, seq, err)
			}
			msgs[c.Name] = append(msgs[c.Name], stored{m.Sequence, m.Subject, m.Header, m.Data})
		}
		for ci := range s.ListConsumers(ctx).Info() {
			cons[c.Name] = append(cons[c.Name], consumerState{ci.Name, ci.Config.FilterSubject,
				ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending})
		}
		sort.Slice(cons[c.Name], func(i, j int) bool { return cons[c.Name][i].Name < cons[c.Name][j].Name })
	}
	return msgs, cons
}

func writeBackup(t *testing.T, m *meshtest.Mesh, path string) *backup.Manifest {
	t.Helper()
	nc := m.Connect(m.Mint(space, meshtest.ProvisionerSpec("backup")))
	acct := m.Account(space)
	man, err := backup.Write(t.Context(), path, backup.Plan{
		Spaces: []backup.SpaceSource{{Name: space, Conn: nc, Account: acct.PublicKey(), AccountJWT: acct.JWT()}},
		Mode:   "auth", Operator: m.Chain.OperatorPublicKey(), OperatorJWT: m.Chain.OperatorJWT(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// TestBackupRestoreByteForByte backs up a used space, restores it on a broker with an
// empty store, and finds every message (sequence, subject, headers, data) and every
// durable's position as they were.
func TestBackupRestoreByteForByte(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	seed(t, js)
	wantMsgs, wantCons := dump(t, js)
	if len(wantMsgs[protocol.StreamChat(space)]) != 3 || len(wantMsgs[protocol.StreamDM(space)]) != 3 {
		t.Fatalf("seeded %v", wantMsgs)
	}
	if c := wantCons[protocol.StreamDM(space)]; len(c) != 1 || c[0].AckFlr == 0 || c[0].Pending != 2 {
		t.Fatalf("DM durable before: %+v", c)
	}

	path := filepath.Join(t.TempDir(), "team.cotal-backup")
	man := writeBackup(t, m, path)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", fi.Mode(), err)
	}
	if _, err := backup.Write(t.Context(), path, backup.Plan{Mode: "open"}); !errors.Is(err, backup.ErrExists) {
		t.Fatalf("write over an existing file: %v", err)
	}

	fresh := meshtest.Serve(t, m.Chain) // a new broker, an empty store
	a, err := backup.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Manifest.Spaces, man.Spaces) {
		t.Fatalf("manifest read back differs")
	}
	pjs := fresh.Provisioner(space)
	rep, err := a.Restore(t.Context(), pjs.Conn(), space)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streams) != len(man.Spaces[0].Streams) {
		t.Fatalf("restored %d streams, want %d", len(rep.Streams), len(man.Spaces[0].Streams))
	}
	// The space's missing streams (presence, leases) come back from provisioning.
	if _, err := provision.Space(t.Context(), pjs, space, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	gotMsgs, gotCons := dump(t, pjs)
	if !reflect.DeepEqual(gotMsgs, wantMsgs) {
		t.Fatalf("messages differ after restore:\n got %v\nwant %v", gotMsgs, wantMsgs)
	}
	if !reflect.DeepEqual(gotCons, wantCons) {
		t.Fatalf("consumers differ after restore:\n got %+v\nwant %+v", gotCons, wantCons)
	}
	// bob's durable goes on from where it stood: the second DM next.
	batch, err := dmConsumer(t, pjs).Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range batch.Messages() {
		if string(msg.Data()) != "dm 1" {
			t.Fatalf("the durable resumed at %q, want dm 1", msg.Data())
		}
	}

	// A second restore over the live space is refused, and changes nothing.
	if _, err := a.Restore(t.Context(), pjs.Conn(), space); !errors.Is(err, backup.ErrLiveSpace) {
		t.Fatalf("restore over a live space: %v", err)
	}
}

// TestCorruptArchiveRefused checks that a truncated archive and one with a byte flipped
// anywhere are refused by Open, before anything is restored.
func TestCorruptArchiveRefused(t *testing.T) {
	m := meshtest.Start(t, space)
	seed(t, m.Provision(space, provision.Options{}))
	path := filepath.Join(t.TempDir(), "b.tar")
	writeBackup(t, m, path)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"truncated by half":   good[:len(good)/2],
		"truncated by 1 KiB":  good[:len(good)-1024],
		"without its trailer": good[:bytes.LastIndex(good, []byte(backup.TrailerName))-345],
	}
	// A flip in a tar header (its checksum) or inside a member's data must be caught; the
	// zero padding after a member's data is not content (tar readers skip it), so flips
	// there are left out: the offsets are the middles of the members' data.
	mids := dataMiddles(t, good)
	for _, at := range []int{100, 700, mids[0], mids[len(mids)/3], mids[len(mids)/2], mids[len(mids)-1]} {
		b := bytes.Clone(good)
		b[at] ^= 0x01
		cases[fmt.Sprintf("byte %d flipped", at)] = b
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.tar")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := backup.Open(p); !errors.Is(err, backup.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// dataMiddles returns, for each tar member of archive with data, the offset of the middle
// byte of its data.
func dataMiddles(t *testing.T, archive []byte) []int {
	t.Helper()
	cr := &countingReader{r: bytes.NewReader(archive)}
	tr := tar.NewReader(cr)
	var mids []int
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			mids = append(mids, cr.n+int(h.Size/2))
		}
	}
	if len(mids) == 0 {
		t.Fatal("the archive has no member with data")
	}
	return mids
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestChangedAfterOpenNotRestored changes a stream's snapshot after Open checked the
// archive: the restore of that stream fails and the broker creates no stream.
func TestChangedAfterOpenNotRestored(t *testing.T) {
	m := meshtest.Start(t, space)
	seed(t, m.Provision(space, provision.Options{}))
	path := filepath.Join(t.TempDir(), "b.tar")
	writeBackup(t, m, path)
	a, err := backup.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte inside CHAT's snapshot, the first stream restored.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, []byte("streams/team/CHAT_team.snapshot")) // its tar header, after the manifest
	if at < 0 {
		t.Fatal("no CHAT member")
	}
	b[at+512+64] ^= 0x01 // inside the member's data, past its tar header
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := meshtest.Serve(t, m.Chain)
	pjs := fresh.Provisioner(space)
	if _, err := a.Restore(t.Context(), pjs.Conn(), space); !errors.Is(err, backup.ErrCorrupt) {
		t.Fatalf("restore of a changed archive: %v, want ErrCorrupt", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := pjs.Stream(ctx, protocol.StreamChat(space)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("CHAT after a refused restore: %v, want no stream", err)
	}
}

// TestForgedDurableRefused restores an archive whose DM durable for bob reads every DM of
// the space (a filter his bind-only durable never has): the restore is refused and leaves
// no stream behind, so bob's credential never binds a reader of other peers' DMs.
func TestForgedDurableRefused(t *testing.T) {
	m := meshtest.Start(t, space)
	js := m.Provision(space, provision.Options{})
	seed(t, js)
	forged := jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerDM(bob, "u2aaaaaaaaaaaaaaaaaaaaaaaaaa"),
		FilterSubject: protocol.InstAll(space),
		AckPolicy:     jetstream.AckExplicitPolicy,
	}
	if _, err := js.CreateConsumer(t.Context(), protocol.StreamDM(space), forged); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.tar")
	writeBackup(t, m, path)
	a, err := backup.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := meshtest.Serve(t, m.Chain)
	pjs := fresh.Provisioner(space)
	if _, err := a.Restore(t.Context(), pjs.Conn(), space); !errors.Is(err, backup.ErrUnsafeConsumer) {
		t.Fatalf("restore of a forged durable: %v, want ErrUnsafeConsumer", err)
	}
	var left []string
	names := pjs.StreamNames(t.Context())
	for n := range names.Name() {
		left = append(left, n)
	}
	if len(left) != 0 {
		t.Fatalf("a refused restore left streams %v", left)
	}
}
