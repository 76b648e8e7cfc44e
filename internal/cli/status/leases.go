package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cotal-ai/cotal/delivery"
	"github.com/cotal-ai/cotal/internal/cli/cmdutil"
	"github.com/cotal-ai/cotal/plane"
	"github.com/cotal-ai/cotal/provision"
)

// LeaseReport says which daemon serves the space for one lane: the delivery daemon's
// lease, or the auth service's plane claim. On a cluster every node runs both daemons and
// one of each serves; this is how an operator finds which.
type LeaseReport struct {
	Name  string `json:"name"`  // "delivery" (the delivery lease) or "auth" (the plane claim)
	State string `json:"state"` // "held", "free" (nobody holds it) or "unknown" (see Error)
	// Here is true when the holder is this project's daemon (delivery: its pid and host;
	// auth: connections on the server this status asked, with the project's auth service up).
	Here     bool   `json:"here"`
	Instance string `json:"instance,omitempty"` // delivery: the holder's run
	Host     string `json:"host,omitempty"`     // delivery: the holder's host
	PID      int    `json:"pid,omitempty"`      // delivery: the holder's pid
	Ready    bool   `json:"ready,omitempty"`    // delivery: the holder serves
	ServerID string `json:"serverId,omitempty"` // auth: the server of the holder's connections
	Gen      uint64 `json:"generation,omitempty"`
	Since    int64  `json:"since,omitempty"` // unix ms: the lease's last write, or when the claim was taken
	Error    string `json:"error,omitempty"`
}

// leaseReports reads the delivery lease, and on a user-auth space the plane claim, with
// js (a connection that may read the space's buckets) through the server whose id is
// serverID. daemons are this project's daemons of the space, to tell whether a holder is
// one of them. A row that cannot be read is reported unknown, never an error: status is
// read-only and shows the rest.
func leaseReports(ctx context.Context, js jetstream.JetStream, space, serverID string, daemons []DaemonReport, userAuth bool) []LeaseReport {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	local := map[string]DaemonReport{}
	for _, d := range daemons {
		local[d.Name] = d
	}
	out := []LeaseReport{deliveryLease(ctx, js, space, local["delivery"])}
	if userAuth {
		out = append(out, planeClaim(ctx, js, space, serverID, local["auth"]))
	}
	return out
}

func deliveryLease(ctx context.Context, js jetstream.JetStream, space string, d DaemonReport) LeaseReport {
	r := LeaseReport{Name: "delivery"}
	info, held, err := delivery.ReadLease(ctx, js, space)
	switch {
	case err != nil:
		r.State, r.Error = "unknown", err.Error()
	case !held:
		r.State = "free"
	default:
		host, _ := os.Hostname()
		r.State, r.Instance, r.Host, r.PID, r.Ready, r.Since = "held", info.Instance, info.Host, info.PID, info.Ready, info.Since
		r.Here = d.State == "up" && d.PID == info.PID && info.Host == host
	}
	return r
}

func planeClaim(ctx context.Context, js jetstream.JetStream, space, serverID string, d DaemonReport) LeaseReport {
	r := LeaseReport{Name: "auth", State: "unknown"}
	kv, err := js.KeyValue(ctx, provision.BucketAuth(space))
	if err != nil {
		r.Error = fmt.Sprintf("auth bucket of space %q: %v", space, err)
		return r
	}
	e, err := kv.Get(ctx, plane.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		r.State = "free"
		return r
	}
	if err != nil {
		r.Error = fmt.Sprintf("plane claim of space %q: %v", space, err)
		return r
	}
	row, err := plane.DecodeRow(e.Value())
	if err != nil {
		r.Error = fmt.Sprintf("plane claim of space %q: %v", space, err)
		return r
	}
	r.Gen, r.Since = row.Generation, int64(row.OpenedAt)
	if row.State != plane.StateHeld {
		r.State = "free"
		return r
	}
	r.State, r.ServerID = "held", row.Ledger.ServerID
	r.Here = d.State == "up" && serverID != "" && row.Ledger.ServerID == serverID
	return r
}

// printLeases writes one line per lease: who holds it, and whether that is this project's
// daemon. What the holder wrote (host, instance) is escaped: it is data from the mesh.
func printLeases(out io.Writer, leases []LeaseReport) {
	for _, l := range leases {
		what := map[string]string{"delivery": "delivery lease", "auth": "auth plane claim"}[l.Name]
		switch l.State {
		case "free":
			fmt.Fprintf(out, "lease    %s free: no daemon holds it\n", what)
		case "unknown":
			fmt.Fprintf(out, "lease    %s unknown (%s)\n", what, cmdutil.OneLine(l.Error))
		default:
			where := "another node's daemon"
			if l.Here {
				where = "this project's daemon"
			}
			since := time.UnixMilli(l.Since).UTC().Format(time.RFC3339)
			if l.Name == "delivery" {
				fmt.Fprintf(out, "lease    %s held by %s: pid %d on host %s (instance %s, written %s)\n", what, where, l.PID, cmdutil.OneLine(l.Host), cmdutil.OneLine(l.Instance), since)
			} else {
				fmt.Fprintf(out, "lease    %s held by %s: connections on server %s (generation %d, since %s)\n", what, where, cmdutil.OneLine(l.ServerID), l.Gen, since)
			}
		}
	}
}
