package plane

import (
	"fmt"

	"github.com/cotal-ai/cotal/protocol"
)

// judge turns the oracle's answer about a held row's holder into nil (both connections
// gone under a complete sweep: the row may be reclaimed) or the refusal. An error, an
// answer that does not echo the query, or anything short of two gone tuples under a
// complete sweep is "may be live": ReasonUnknown. A live tuple is ReasonLivePeer.
func judge(space string, held Row, q protocol.LivenessArgs, res protocol.LivenessResult, err error) *Refusal {
	next := fmt.Sprintf("make sure the delivery daemon of the space runs (`cotal deliver --space %s`) and try again; "+
		"if the other auth service still runs, stop it first", space)
	unknown := func(why string, cause error) *Refusal {
		return &Refusal{Space: space, Reason: ReasonUnknown, Err: cause, Next: next,
			Why: fmt.Sprintf("the plane is held (generation %d) and its holder could not be proved gone: %s", held.Generation, why)}
	}
	if err != nil {
		return unknown(fmt.Sprintf("the liveness oracle did not answer: %v", err), err)
	}
	if res.Ledger.Tuple != q.Ledger || res.Records.Tuple != q.Records {
		return unknown("the liveness oracle's answer does not name the connections asked about", nil)
	}
	for _, t := range []struct {
		name string
		st   protocol.TupleState
	}{{"ledger", res.Ledger}, {"records", res.Records}} {
		if t.st.State == protocol.ConnLive {
			return &Refusal{Space: space, Reason: ReasonLivePeer,
				Why: fmt.Sprintf("another auth service holds the plane of space %q (generation %d; its %s connection cid %d on server %s is live)",
					space, held.Generation, t.name, t.st.Tuple.CID, t.st.Tuple.ServerID),
				Next: "stop it first, then start this auth service again"}
		}
	}
	if res.SweepComplete && res.Ledger.State == protocol.ConnGone && res.Records.State == protocol.ConnGone {
		return nil
	}
	why := fmt.Sprintf("ledger %s, records %s, sweep complete %t", res.Ledger.State, res.Records.State, res.SweepComplete)
	if res.Note != "" {
		why += " (" + res.Note + ")"
	}
	return unknown(why, nil)
}
