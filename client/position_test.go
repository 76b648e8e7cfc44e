package client

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A post routed just before the live subscription existed can be stored just after the
// watermark was read, so it lies inside the live interval without having reached the
// connection. Its hand-off copy must not be judged given while the id window still
// remembers every post surfaced since the join: the id alone decides.
func TestHandoffCopyInsideLiveIntervalJudgedByIDWhileWindowHolds(t *testing.T) {
	seen := newDedupe(4)
	p := newPositions(seen)
	p.tracks["review"] = &posTrack{channel: "review", from: 0, live: 1, idMark: seen.mark()}

	if p.givenAt("review", 1) {
		t.Fatal("a copy whose id was never surfaced was judged given by the live interval")
	}
	if p.liveMayCover("review", 2) {
		t.Fatal("a live confirmation was asked for while ids decide")
	}

	// Once more ids passed than the window holds, a post read live may be forgotten:
	// then the live interval is what says it was given.
	for i := range 5 {
		seen.first(fmt.Sprint("id-", i))
	}
	if !p.givenAt("review", 1) {
		t.Fatal("with the id window turned over, a post in the live interval was not judged given")
	}
	if !p.liveMayCover("review", 2) {
		t.Fatal("with the id window turned over, no live confirmation was asked for")
	}
}

func TestDedupeHoldsSince(t *testing.T) {
	d := newDedupe(3)
	m := d.mark()
	for i := range 3 {
		d.first(fmt.Sprint(i))
	}
	d.first("0") // a duplicate records nothing
	if !d.holdsSince(m) {
		t.Fatal("three ids in a window of three were reported forgotten")
	}
	d.first("3")
	if d.holdsSince(m) {
		t.Fatal("a fourth id in a window of three: the first is forgotten, but holdsSince said no")
	}
}

// The daemon may copy a post to the hand-off durable before it hears that the member
// reads live; the copy then arrives after the live copy surfaced and before the live
// position was confirmed past it, so no window says whether the post was taken. While
// the live copy is not taken, the hand-off copy is held (naked at Close, for the next
// incarnation), not acked: a live copy cannot be handed back, so acking it lost the post.
func TestHandoffCopyOfLivePostNotYetConfirmedHeldUntilTaken(t *testing.T) {
	e := &Endpoint{pos: newPositions(newDedupe(4)), inbox: make(chan *Incoming, 4)}
	e.pos.tracks["general"] = &posTrack{channel: "general", from: 10}
	e.TakeOnAck()
	in := &Incoming{}
	e.openUntilAck(in) // the live copy of the post at 11, surfaced and held unacked
	e.noteSurfaced()

	if !e.holdCopy("general", 11, nil) {
		t.Fatal("a hand-off copy of a live post not yet taken was acked")
	}
	if acks := e.pos.settleTaken(e.taken()); len(acks) != 0 {
		t.Fatalf("%d held copies settled before the live copy was taken", len(acks))
	}
	if err := in.Ack(); err != nil {
		t.Fatal(err)
	}
	if acks := e.pos.settleTaken(e.taken()); len(acks) != 1 {
		t.Fatalf("%d held copies settled once the live copy was taken, want 1", len(acks))
	}
	if e.holdCopy("general", 11, nil) {
		t.Fatal("a hand-off copy of a live post already taken was held")
	}
}

// nakCount is a hand-off copy that counts its naks.
type nakCount struct {
	jetstream.Msg
	naks int
}

func (m *nakCount) Nak() error { m.naks++; return nil }

func (m *nakCount) Subject() string { return "dlv" }

// A copy held (a live post not yet taken) or handed back after Close returned the held
// copies is naked at once: kept in the held list, it came back only after its ack wait.
func TestCopyHeldAfterReturnNakedAtOnce(t *testing.T) {
	e := &Endpoint{pos: newPositions(newDedupe(4)), inbox: make(chan *Incoming, 4), log: slog.New(slog.DiscardHandler)}
	e.pos.tracks["general"] = &posTrack{channel: "general", from: 10}
	e.TakeOnAck()
	e.openUntilAck(&Incoming{}) // the live copy of the post at 11, surfaced and not taken
	e.noteSurfaced()
	e.pos.mu.Lock()
	e.pos.returned = true // Close handed the held copies back
	e.pos.mu.Unlock()

	held := &nakCount{}
	if !e.holdCopy("general", 11, held) {
		t.Fatal("a hand-off copy of a live post not yet taken was acked")
	}
	back := &nakCount{}
	e.handBack("general", 12, back)
	if held.naks != 1 || back.naks != 1 || len(e.pos.held) != 0 {
		t.Fatalf("naks %d (held) and %d (handed back), %d kept; want each naked at once, none kept",
			held.naks, back.naks, len(e.pos.held))
	}
}
