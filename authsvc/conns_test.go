package authsvc

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cotal-ai/cotal/internal/connz"
	"github.com/cotal-ai/cotal/internal/meshtest"
)

// maxLaneConns is the broker connections one serving lane may hold (issue 30 item 6).
const maxLaneConns = 2

// TestLaneConnections: a serving lane holds at most two broker connections, counted on
// the broker: every open connection named as the lane's, or authenticated as the plane's
// user or the callout's. The plane claim names a connection among them in both tuples.
func TestLaneConnections(t *testing.T) {
	f := startLane(t)
	row := f.planeRow(t)
	calloutUser := meshtest.UserKey(t, f.ua.CalloutCreds())
	sys := meshtest.SystemConn(t, f.Chain, f.URL)
	pages, err := connz.Ask(t.Context(), sys, "$SYS.REQ.SERVER.PING.CONNZ",
		map[string]any{"auth": true, "limit": 1024}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lane []string
	var cids []uint64
	for _, p := range pages {
		for _, c := range p.Conns {
			if strings.HasPrefix(c.Name, "cotal:auth-service:"+testSpace+":") ||
				c.User == row.Ledger.UserNkey || c.User == row.Records.UserNkey || c.User == calloutUser {
				lane = append(lane, fmt.Sprintf("cid %d %q user %s", c.CID, c.Name, c.User))
				cids = append(cids, c.CID)
			}
		}
	}
	if len(lane) > maxLaneConns {
		t.Fatalf("the lane holds %d broker connections, want at most %d: %s", len(lane), maxLaneConns, strings.Join(lane, "; "))
	}
	for name, cid := range map[string]uint64{"ledger": row.Ledger.CID, "records": row.Records.CID} {
		if !slices.Contains(cids, cid) {
			t.Fatalf("the claim's %s tuple names cid %d, not one of the lane's connections: %s", name, cid, strings.Join(lane, "; "))
		}
	}
	t.Logf("lane connections: %s", strings.Join(lane, "; "))
}
