package authsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// connzPage is how many connections one CONNZ request lists.
const connzPage = 1024

// Evict closes, from the broker's side, every open connection of the data account account
// for which match(user) holds, user being the connection's authorized user as the broker
// reports it: for a connection an auth callout admitted, the name of the user JWT the
// callout minted, "<owner>.<actor>". sys is a system-account connection; under a single
// server. It returns how many it closed. A revoke uses it so a revoked actor's live
// connections do not outlive the grant.
func Evict(ctx context.Context, sys *nats.Conn, account string, match func(user string) bool) (int, error) {
	type conn struct {
		CID  uint64 `json:"cid"`
		User string `json:"authorized_user"`
	}
	var victims []conn
	server := ""
	for offset := 0; ; offset += connzPage {
		req, _ := json.Marshal(map[string]any{"auth": true, "limit": connzPage, "offset": offset})
		msg, err := sys.RequestWithContext(ctx, "$SYS.REQ.ACCOUNT."+account+".CONNZ", req)
		if err != nil {
			return 0, fmt.Errorf("evict: list connections: %w", err)
		}
		var resp struct {
			Server struct {
				ID string `json:"id"`
			} `json:"server"`
			Data *struct {
				Conns []conn `json:"connections"`
				Total int    `json:"total"`
			} `json:"data"`
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return 0, fmt.Errorf("evict: connections: %w", err)
		}
		if resp.Error != nil || resp.Data == nil {
			return 0, fmt.Errorf("evict: the broker refused to list connections: %+v", resp.Error)
		}
		server = resp.Server.ID
		for _, c := range resp.Data.Conns {
			if match(c.User) {
				victims = append(victims, c)
			}
		}
		if len(resp.Data.Conns) < connzPage {
			break
		}
	}
	n := 0
	for _, v := range victims {
		body, _ := json.Marshal(map[string]uint64{"cid": v.CID})
		if _, err := sys.RequestWithContext(ctx, "$SYS.REQ.SERVER."+server+".KICK", body); err != nil {
			return n, fmt.Errorf("evict connection %d: %w", v.CID, err)
		}
		n++
	}
	return n, nil
}

// CalloutPrincipal returns a match for Evict: connections an auth callout admitted as
// actor, of owner only when owner is not empty (callout owners are "u_" tokens).
func CalloutPrincipal(owner, actor string) func(user string) bool {
	return func(user string) bool {
		o, a, ok := strings.Cut(user, ".")
		return ok && a == actor && strings.HasPrefix(o, "u_") && (owner == "" || o == owner)
	}
}
