package plane

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/protocol"
)

// TestAcquireRelease: an absent row is created at generation 1 without asking the oracle;
// a clean release marks it released; a released row is claimed at generation 2, again
// without the oracle, under a fresh claim id.
func TestAcquireRelease(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	ledger, records := fakeTuple(1), fakeTuple(2)
	cl, err := m.claimer(never(t), ledger, records).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	row, rev := m.stored()
	if row.Generation != 1 || row.State != StateHeld || row.Ledger != ledger || row.Records != records ||
		row.ClaimID != cl.Row().ClaimID || rev != cl.Revision() || row.V != Version || row.OpenedAt == 0 {
		t.Fatalf("stored %+v rev %d, claim %+v rev %d", row, rev, cl.Row(), cl.Revision())
	}
	if err := cl.Verify(ctx); err != nil {
		t.Fatalf("verify a held claim: %v", err)
	}

	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if row, _ := m.stored(); row.State != StateReleased || row.Generation != 1 || row.ClaimID != cl.Row().ClaimID {
		t.Fatalf("after release: %+v", row)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if err := cl.Verify(ctx); !Refused(err, ReasonLost) {
		t.Fatalf("verify a released claim: %v", err)
	}

	next, err := m.claimer(never(t), fakeTuple(3), fakeTuple(4)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	row, _ = m.stored()
	if row.Generation != 2 || row.State != StateHeld || row.ClaimID == cl.Row().ClaimID || row.ClaimID != next.Row().ClaimID {
		t.Fatalf("reclaim of a released row: %+v", row)
	}
}

// TestHeldRow: a held row is reclaimed only when the oracle says both tuples are gone
// under a complete sweep; live refuses live-peer; everything else refuses unknown; a
// refusal leaves the row as it was.
func TestHeldRow(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	holder, err := m.claimer(never(t), fakeTuple(1), fakeTuple(2)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notEchoed := oracleFunc(func(ctx context.Context, a protocol.LivenessArgs) (protocol.LivenessResult, error) {
		a.Ledger.CID++
		return answer(protocol.ConnGone, protocol.ConnGone, true)(ctx, a)
	})
	failing := oracleFunc(func(context.Context, protocol.LivenessArgs) (protocol.LivenessResult, error) {
		return protocol.LivenessResult{}, errors.New("oracle unreachable")
	})
	for _, c := range []struct {
		name   string
		o      Oracle
		reason string
		text   string
	}{
		{"ledger live", answer(protocol.ConnLive, protocol.ConnGone, true), ReasonLivePeer, "ledger connection cid 1 on server NFAKESERVER is live"},
		{"records live, incomplete sweep", answer(protocol.ConnUnknown, protocol.ConnLive, false), ReasonLivePeer, "stop it first"},
		{"both unknown", answer(protocol.ConnUnknown, protocol.ConnUnknown, true), ReasonUnknown, "cotal deliver --space team"},
		{"one unknown", answer(protocol.ConnGone, protocol.ConnUnknown, true), ReasonUnknown, "records unknown"},
		{"gone without a complete sweep", answer(protocol.ConnGone, protocol.ConnGone, false), ReasonUnknown, "sweep complete false"},
		{"garbled state", answer("dead", "dead", true), ReasonUnknown, "could not be proved gone"},
		{"answer not echoing the query", notEchoed, ReasonUnknown, "does not name the connections"},
		{"oracle error", failing, ReasonUnknown, "oracle unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, before := m.stored()
			_, err := m.claimer(c.o, fakeTuple(3), fakeTuple(4)).Acquire(ctx)
			if !Refused(err, c.reason) || !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), `space "team"`) {
				t.Fatalf("got %v, want a %s refusal saying %q", err, c.reason, c.text)
			}
			if row, rev := m.stored(); rev != before || row.ClaimID != holder.Row().ClaimID {
				t.Fatalf("a refusal changed the row: %+v rev %d", row, rev)
			}
		})
	}

	next, err := m.claimer(answer(protocol.ConnGone, protocol.ConnGone, true), fakeTuple(3), fakeTuple(4)).Acquire(ctx)
	if err != nil {
		t.Fatalf("reclaim from a gone holder: %v", err)
	}
	if row, _ := m.stored(); row.Generation != 2 || row.ClaimID != next.Row().ClaimID || row.Ledger.CID != 3 || row.Records.CID != 4 {
		t.Fatalf("after reclaim: %+v", row)
	}
	if err := holder.Verify(ctx); !Refused(err, ReasonLost) {
		t.Fatalf("the old holder's verify: %v", err)
	}
}

// racing is a Store whose writes are each preceded by another writer's.
type racing struct {
	Store
	race   func()
	writes atomic.Int32
}

func (r *racing) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	r.writes.Add(1)
	r.race()
	return r.Store.Create(ctx, key, value, opts...)
}

func (r *racing) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	r.writes.Add(1)
	r.race()
	return r.Store.Update(ctx, key, value, revision)
}

// TestConcurrent: a claim that loses its compare-and-set re-reads and decides again; a
// second loss refuses concurrent and writes nothing of its own.
func TestConcurrent(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	gen := uint64(0)
	other := func() { // another claimer's write: a released row one generation on
		gen++
		r := Row{V: Version, Generation: gen, ClaimID: "other", State: StateReleased,
			Ledger: fakeTuple(8), Records: fakeTuple(9), OpenedAt: 1}
		if _, err := m.kv.Put(ctx, Key, r.Encode()); err != nil {
			t.Error(err)
		}
	}

	st := &racing{Store: m.kv, race: other}
	c := m.claimer(never(t), fakeTuple(1), fakeTuple(2))
	c.KV = st
	_, err := c.Acquire(ctx)
	if !Refused(err, ReasonConcurrent) || !strings.Contains(err.Error(), "stop the other one") {
		t.Fatalf("two lost writes: %v", err)
	}
	if n := st.writes.Load(); n != 2 {
		t.Fatalf("%d claim writes, want 2 (a create, then an update after the re-read)", n)
	}
	if row, _ := m.stored(); row.ClaimID != "other" || row.Generation != 2 {
		t.Fatalf("the row after two lost writes: %+v", row)
	}

	once := false
	st = &racing{Store: m.kv, race: func() {
		if !once {
			once = true
			other()
		}
	}}
	c.KV = st
	cl, err := c.Acquire(ctx)
	if err != nil {
		t.Fatalf("one lost write: %v", err)
	}
	if row, _ := m.stored(); row.Generation != 4 || row.ClaimID != cl.Row().ClaimID || st.writes.Load() != 2 {
		t.Fatalf("after one lost write: %+v, %d writes", row, st.writes.Load())
	}
}

// TestCorrupt: a row that does not decode refuses corrupt, names the repair and is left
// alone; after the repair the next claim writes generation 1.
func TestCorrupt(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	good := Row{V: Version, Generation: 3, ClaimID: "x", State: StateHeld, Ledger: fakeTuple(1), Records: fakeTuple(2), OpenedAt: 1}
	for _, v := range []string{
		"not json",
		strings.Replace(string(good.Encode()), `"v":1`, `"v":2`, 1),
		strings.Replace(string(good.Encode()), `"state":"held"`, `"state":"taken"`, 1),
	} {
		rev, err := m.kv.Put(ctx, Key, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.claimer(never(t), fakeTuple(3), fakeTuple(4)).Acquire(ctx)
		if !Refused(err, ReasonCorrupt) || !strings.Contains(err.Error(), "`nats kv del cotal_auth_team plane`") {
			t.Fatalf("row %s: %v", v, err)
		}
		if e, err := m.kv.Get(ctx, Key); err != nil || e.Revision() != rev {
			t.Fatalf("row %s was touched: %v", v, err)
		}
	}
	if err := m.kv.Delete(ctx, Key); err != nil { // the repair the refusal names
		t.Fatal(err)
	}
	if _, err := m.claimer(never(t), fakeTuple(3), fakeTuple(4)).Acquire(ctx); err != nil {
		t.Fatalf("claim after the repair: %v", err)
	}
	if row, _ := m.stored(); row.Generation != 1 {
		t.Fatalf("after the repair: %+v", row)
	}
}

// TestForeignRowExtraKeys: a released row another implementation wrote with a key this
// schema does not know is read, not refused as corrupt: the next claim takes it over.
func TestForeignRowExtraKeys(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	rel := Row{V: Version, Generation: 3, ClaimID: "x", State: StateReleased, Ledger: fakeTuple(1), Records: fakeTuple(2), OpenedAt: 1}
	if _, err := m.kv.Put(ctx, Key, []byte(strings.Replace(string(rel.Encode()), `{`, `{"writer":"ts-auth-7",`, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := m.claimer(never(t), fakeTuple(3), fakeTuple(4)).Acquire(ctx); err != nil {
		t.Fatalf("claim over a row with an extra key: %v", err)
	}
	if row, _ := m.stored(); row.Generation != 4 || row.State != StateHeld {
		t.Fatalf("after the claim: %+v", row)
	}
}

// TestReleaseChanged: a release whose row changed under it says so and leaves the row.
func TestReleaseChanged(t *testing.T) {
	m := newMesh(t)
	ctx := t.Context()
	cl, err := m.claimer(never(t), fakeTuple(1), fakeTuple(2)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	taken := Row{V: Version, Generation: 2, ClaimID: "successor", State: StateHeld, Ledger: fakeTuple(5), Records: fakeTuple(6), OpenedAt: 1}
	rev, err := m.kv.Put(ctx, Key, taken.Encode())
	if err != nil {
		t.Fatal(err)
	}
	err = cl.Release(ctx)
	if !Refused(err, ReasonLost) || !strings.Contains(err.Error(), "claim id successor") || !strings.Contains(err.Error(), "left as it is") {
		t.Fatalf("release of a changed row: %v", err)
	}
	if row, now := m.stored(); now != rev || row != taken {
		t.Fatalf("the release overwrote the row: %+v rev %d", row, now)
	}
	if err := cl.Verify(ctx); !Refused(err, ReasonLost) {
		t.Fatalf("verify of a changed row: %v", err)
	}
}

// TestConfig: Acquire checks its fields before any I/O.
func TestConfig(t *testing.T) {
	ok := Claimer{Space: space, KV: &racing{}, Oracle: answer("", "", false), Ledger: fakeTuple(1), Records: fakeTuple(2)}
	for name, mod := range map[string]func(*Claimer){
		"bad space":    func(c *Claimer) { c.Space = "a.b" },
		"no bucket":    func(c *Claimer) { c.KV = nil },
		"no oracle":    func(c *Claimer) { c.Oracle = nil },
		"bad tuple":    func(c *Claimer) { c.Ledger.CID = 0 },
		"bad user key": func(c *Claimer) { c.Records.UserNkey = "nope" },
	} {
		c := ok
		mod(&c)
		if _, err := c.Acquire(t.Context()); err == nil || !strings.Contains(err.Error(), "config") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
