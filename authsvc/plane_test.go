package authsvc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/callout"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/protocol"
	"github.com/cotal-ai/cotal/provision"
)

// oracleSays answers every liveness question with state for both tuples.
type oracleSays string

func (o oracleSays) Liveness(_ context.Context, a protocol.LivenessArgs) (protocol.LivenessResult, error) {
	return protocol.LivenessResult{
		Ledger:        protocol.TupleState{Tuple: a.Ledger, State: string(o)},
		Records:       protocol.TupleState{Tuple: a.Records, State: string(o)},
		SweepComplete: true,
	}, nil
}

// planeRow reads the plane claim of testSpace.
func (f *laneFixture) planeRow(t *testing.T) plane.Row {
	t.Helper()
	e, err := f.kv.Get(t.Context(), plane.Key)
	if err != nil {
		t.Fatalf("plane row: %v", err)
	}
	r, err := plane.DecodeRow(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPlaneClaim: the running lane holds the plane; a second lane for the space refuses
// live-peer while the oracle says its holder lives, and reclaims once it says gone; a
// clean stop leaves the claim released.
func TestPlaneClaim(t *testing.T) {
	f := startLane(t)
	held := f.planeRow(t)
	if held.State != plane.StateHeld || held.Generation != 1 {
		t.Fatalf("plane after start: %+v", held)
	}

	second := *f.lane
	second.Dir = t.TempDir()
	second.Oracle = oracleSays(protocol.ConnLive)
	err := second.Run(t.Context(), func() { t.Error("a second lane got ready beside a live holder") })
	if !plane.Refused(err, plane.ReasonLivePeer) {
		t.Fatalf("second lane: %v, want a live-peer refusal", err)
	}

	if err := f.stop(t); err != nil {
		t.Fatal(err)
	}
	if r := f.planeRow(t); r.State != plane.StateReleased || r.Generation != 1 {
		t.Fatalf("plane after a clean stop: %+v", r)
	}

	// Released: the next lane takes generation 2 without asking the oracle.
	third := *f.lane
	third.Oracle = oracleSays("must not be asked")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- third.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("third lane: %v", err)
	case <-time.After(deadline):
		t.Fatal("third lane not ready")
	}
	if r := f.planeRow(t); r.State != plane.StateHeld || r.Generation != 2 {
		t.Fatalf("plane after the reclaim: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFence: kicking the plane's ledger connection from the system account fences the
// lane at once: it ends with ErrFenced, and a bearer it would have admitted before is
// refused.
func TestFence(t *testing.T) {
	f := startLane(t)
	x := f.exchange(t, "alice")
	if nc, err := f.dialBearer(x.Owner, x.Actor, x.Token); err != nil {
		t.Fatalf("before the kick: %v", err)
	} else {
		nc.Close()
	}

	sysCreds, err := f.Chain.SystemCreds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := connect(f.URL, sysCreds, "test-kicker")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ledgerConn := f.planeRow(t).Ledger
	cid := ledgerConn.CID
	body, _ := json.Marshal(map[string]uint64{"cid": cid})
	if _, err := sys.Request("$SYS.REQ.SERVER."+ledgerConn.ServerID+".KICK", body, deadline); err != nil {
		t.Fatalf("kick cid %d: %v", cid, err)
	}

	ended, err := f.ended(deadline)
	if !ended {
		t.Fatal("the lane kept running after losing its plane connection")
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("lane after the kick: %v, want ErrFenced", err)
	}
	if nc, err := f.dialBearer(x.Owner, x.Actor, x.Token, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a fenced lane's space still admitted a bearer")
	}
}

// TestFencedAuthorizerIsSilent: a fenced lane's authorizer has the callout drop the request
// (no reply, not even a signed refusal), and says why.
func TestFencedAuthorizerIsSilent(t *testing.T) {
	f := newFence()
	a := &authorizer{fence: f}
	f.trip("ledger connection")
	_, err := a.Authorize(t.Context(), &jwt.AuthorizationRequest{})
	if !errors.Is(err, callout.ErrDropped) || !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced authorizer: %v, want a drop wrapping ErrFenced", err)
	}
}

// TestCloseConfirmsClaimRelease: a plane claim release the broker refuses at close is
// retried, and the lane's close is confirmed (Run returns) only once the claim reads
// released.
func TestCloseConfirmsClaimRelease(t *testing.T) {
	f := startLane(t)
	ctx := t.Context()
	js := f.Provisioner(testSpace)
	s, err := js.Stream(ctx, "KV_"+provision.BucketAuth(testSpace))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	orig := cfg.MaxMsgSize
	cfg.MaxMsgSize = 1 // the released row no longer fits
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f.cancel()
	if ended, err := f.ended(2500 * time.Millisecond); ended {
		t.Fatalf("the lane closed with its claim unreleased: %v", err)
	}
	if row := f.planeRow(t); row.State != plane.StateHeld {
		t.Fatalf("claim while the release is refused: %s", row.State)
	}
	cfg.MaxMsgSize = orig
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if ended, err := f.ended(deadline); !ended || err != nil {
		t.Fatalf("close: ended %v, %v", ended, err)
	}
	if row := f.planeRow(t); row.State != plane.StateReleased {
		t.Fatalf("claim after the close: %s", row.State)
	}
}

// TestRefusedLaneKeepsStatus: a second lane of the space that the plane claim refuses
// leaves the running lane's auth-service.json in place, so local clients still find the
// exchange that serves.
func TestRefusedLaneKeepsStatus(t *testing.T) {
	f := startLane(t)
	before, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	second := *f.lane // same state folder as the running lane
	second.Oracle = oracleSays(protocol.ConnLive)
	err = second.Run(t.Context(), func() { t.Error("a second lane got ready beside a live holder") })
	if !plane.Refused(err, plane.ReasonLivePeer) {
		t.Fatalf("second lane: %v, want a live-peer refusal", err)
	}
	after, err := ReadStatus(f.dir)
	if err != nil {
		t.Fatalf("status after the refused lane: %v", err)
	}
	if after != before {
		t.Fatalf("status changed: %+v, was %+v", after, before)
	}
}
