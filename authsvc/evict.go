package authsvc

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cotal-ai/cotal/internal/connz"
)

// connzPage is how many connections one CONNZ request lists.
const connzPage = 1024

// Evict closes, from the broker's side, every open connection of the data account account
// for which match holds, as the broker lists it (with its authorized user, tags and JWT). sys is a system-account connection to any server of the broker: Evict asks every
// server of its cluster for its connections, and kicks each victim on the server that
// reported it. It returns how many it closed. A revoke uses it so a revoked actor's live
// connections do not outlive the grant.
func Evict(ctx context.Context, sys *nats.Conn, account string, match func(connz.Conn) bool) (int, error) {
	return evict(ctx, sys, account, match, connzPage)
}

// evict is Evict listing pageSize connections per CONNZ request.
func evict(ctx context.Context, sys *nats.Conn, account string, match func(connz.Conn) bool, pageSize int) (int, error) {
	req := map[string]any{"acc": account, "auth": true, "limit": pageSize}
	pages, err := connz.Ask(ctx, sys, "$SYS.REQ.SERVER.PING.CONNZ", req, nil)
	if err != nil {
		return 0, fmt.Errorf("evict: list connections: %w", err)
	}
	// List every victim before kicking any: a kick would shift the later pages.
	victims := map[string][]uint64{} // server ID -> CIDs
	for _, page := range pages {
		server := page.Server
		for offset := pageSize; ; offset += pageSize {
			for _, c := range page.Conns {
				if match(c) {
					victims[server] = append(victims[server], c.CID)
				}
			}
			if len(page.Conns) < pageSize {
				break
			}
			req["offset"] = offset
			next, err := connz.Ask(ctx, sys, "$SYS.REQ.SERVER."+server+".CONNZ", req, func([]*connz.Page) bool { return true })
			if err != nil {
				return 0, fmt.Errorf("evict: list connections of server %s: %w", server, err)
			}
			page = next[0]
		}
	}
	n := 0
	for server, cids := range victims {
		for _, cid := range cids {
			closed, err := connz.Kick(ctx, sys, server, cid)
			if err != nil {
				return n, err
			}
			if closed {
				n++
			}
		}
	}
	return n, nil
}

// CalloutPrincipal returns a match for Evict: connections an auth callout admitted as
// actor, of owner only when owner is not empty (callout owners are "u_" tokens, which hold
// neither "-" nor "."). The callout's user is "<owner>-<actor>", the reference's form, or
// "<owner>.<actor>", which Go callouts minted before it; a connection with a user JWT of
// its own never matches, whatever user name it sent (connz.Conn.CalloutUser).
func CalloutPrincipal(owner, actor string) func(connz.Conn) bool {
	return func(c connz.Conn) bool {
		user := c.CalloutUser()
		o, a, ok := strings.Cut(user, "-")
		if !ok {
			o, a, ok = strings.Cut(user, ".")
		}
		return ok && a == actor && strings.HasPrefix(o, "u_") && (owner == "" || o == owner)
	}
}
