// Package plane is the auth service's plane claim: the one KV row that says which auth
// service holds a space's authority plane.
//
// The claim is the key "plane" (Key) of the space's auth bucket, cotal_auth_<space>
// (provision.BucketAuth). It is never deleted: a holder that closes cleanly marks it
// released, and the next claimer advances its generation. The row names the holder's two
// sealed scanner connections (ledger and records) as broker connection tuples, so that a
// successor can ask the delivery daemon's liveness oracle whether the holder is gone. The
// two may be one connection named twice (a Go auth service holds one plane connection);
// each tuple is judged on its own either way.
//
// Claiming (Claimer.Acquire):
//
//   - key absent: create generation 1 (create-only write);
//   - released: compare-and-set on the read revision to generation+1, held;
//   - held: ask the Oracle about the holder's tuples. Only "gone" for both under a complete
//     sweep allows a compare-and-set reclaim; "live" for either refuses ReasonLivePeer;
//     anything else (unknown, an error, no answer, an answer that does not echo the query)
//     refuses ReasonUnknown. There is no TTL and no heartbeat.
//
// A lost compare-and-set re-reads the row once and decides again; a second loss refuses
// ReasonConcurrent. A row that does not decode refuses ReasonCorrupt with the repair.
// Every refusal is a *Refusal.
//
// A gone verdict is only sound under a single nats-server: connection ids are that
// server's. The oracle (delivery/oracle.go) answers "unknown" for another server's tuple.
package plane
