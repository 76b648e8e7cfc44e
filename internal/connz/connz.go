// Package connz reads the broker's connection listings: the answers to the system
// account's CONNZ requests ($SYS.REQ.ACCOUNT.<account>.CONNZ, $SYS.REQ.SERVER.<id>.CONNZ
// and $SYS.REQ.SERVER.PING.CONNZ), and its ROUTEZ answers; Kick closes one connection.
package connz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Conn is one listed connection.
type Conn struct {
	CID  uint64 `json:"cid"`
	Name string `json:"name"` // the name the client gave
	// User is the authorized user: for a connection an auth callout admitted, the name of
	// the user JWT it minted; for one that presented a user JWT, the user's public key.
	User string `json:"authorized_user"`
	// Tags are the tags of the user JWT the connection presented (a request with auth).
	Tags []string `json:"tags"`
	// JWT is the user JWT the connection presented (a request with auth). The server
	// clears it for a connection an auth callout admitted, and lists none for a bearer
	// JWT.
	JWT string `json:"jwt"`
}

// CalloutUser is the authorized user of a connection an auth callout admitted: the name
// of the user JWT the callout minted; "" for any other connection. A connection that
// presented a user JWT of its own is listed with it, and its authorized user may be a
// name the client sent in its CONNECT, which must never name a principal.
func (c Conn) CalloutUser() string {
	if c.JWT != "" {
		return ""
	}
	return c.User
}

// Page is one server's answer: its id, its cluster's name ("" for a standalone server),
// the connections it listed and how many matched in all (Total, which exceeds
// len(Conns) when the listing was cut at the request's limit); for a ROUTEZ request, the
// ids of the servers it has routes to.
type Page struct {
	Server  string
	Cluster string
	Conns   []Conn
	Total   int
	Routes  []string
}

// Decode reads one server's answer. An error answer, or one without data, is an error
// naming the server.
func Decode(data []byte) (*Page, error) {
	var resp struct {
		Server struct {
			ID      string `json:"id"`
			Cluster string `json:"cluster"`
		} `json:"server"`
		Data *struct {
			ID     string `json:"server_id"`
			Conns  []Conn `json:"connections"`
			Total  int    `json:"total"`
			Routes []struct {
				RemoteID string `json:"remote_id"`
			} `json:"routes"`
		} `json:"data"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("connection listing: %w", err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("server %s refused to list connections: %d %s", resp.Server.ID, resp.Error.Code, resp.Error.Description)
	}
	if resp.Data == nil {
		return nil, fmt.Errorf("server %s listed no connections", resp.Server.ID)
	}
	p := &Page{Server: resp.Data.ID, Cluster: resp.Server.Cluster, Conns: resp.Data.Conns, Total: resp.Data.Total}
	for _, r := range resp.Data.Routes {
		p.Routes = append(p.Routes, r.RemoteID)
	}
	if p.Server == "" {
		p.Server = resp.Server.ID
	}
	return p, nil
}

// Collection bounds of Ask.
const (
	// FirstAnswer is how long Ask waits for the first server to answer.
	FirstAnswer = 5 * time.Second
	// Quiet is how long without a further answer after which Ask takes every server to
	// have answered.
	Quiet = 250 * time.Millisecond
)

// Ask publishes a CONNZ request on subject and collects the servers' answers: a PING
// subject ($SYS.REQ.SERVER.PING.CONNZ, $SYS.REQ.ACCOUNT.PING.CONNZ) is answered by every
// server of a cluster, a server's own subject by that server. It returns once enough
// reports true for the answers so far (nil: never), once Quiet passed without a further
// answer, or with an error when no server answered within FirstAnswer, an answer does not
// decode, or ctx ends first.
func Ask(ctx context.Context, nc *nats.Conn, subject string, req any, enough func([]*Page) bool) ([]*Page, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("connection listing request: %w", err)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return nil, fmt.Errorf("ask %s: %w", subject, err)
	}
	var pages []*Page
	for wait := FirstAnswer; ; wait = Quiet {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			if len(pages) == 0 {
				return nil, fmt.Errorf("ask %s: no server answered in %s", subject, wait)
			}
			return pages, nil
		case err != nil:
			return nil, fmt.Errorf("ask %s: %w", subject, err)
		}
		page, err := Decode(msg.Data)
		if err != nil {
			return nil, err
		}
		if pages = append(pages, page); enough != nil && enough(pages) {
			return pages, nil
		}
	}
}

// Kick closes connection cid of server from the broker's side
// ($SYS.REQ.SERVER.<server>.KICK). A connection the server no longer has (it closed since it
// was listed) is not an error: closed is false.
func Kick(ctx context.Context, nc *nats.Conn, server string, cid uint64) (closed bool, err error) {
	body, err := json.Marshal(struct {
		CID uint64 `json:"cid"`
	}{cid})
	if err != nil {
		return false, fmt.Errorf("kick connection %d of server %s: %w", cid, server, err)
	}
	msg, err := nc.RequestWithContext(ctx, "$SYS.REQ.SERVER."+server+".KICK", body)
	if err != nil {
		return false, fmt.Errorf("kick connection %d of server %s: %w", cid, server, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	switch err := json.Unmarshal(msg.Data, &resp); {
	case err != nil:
		return false, fmt.Errorf("kick connection %d of server %s: %w", cid, server, err)
	case resp.Error == nil:
		return true, nil
	case strings.HasPrefix(resp.Error.Description, "no such client"):
		return false, nil
	default:
		return false, fmt.Errorf("kick connection %d of server %s: refused: %s", cid, server, resp.Error.Description)
	}
}
