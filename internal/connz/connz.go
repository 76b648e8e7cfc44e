// Package connz reads the broker's connection listings: the answers to the system
// account's CONNZ requests ($SYS.REQ.ACCOUNT.<account>.CONNZ, $SYS.REQ.SERVER.<id>.CONNZ
// and $SYS.REQ.SERVER.PING.CONNZ).
package connz

import (
	"encoding/json"
	"fmt"
)

// Conn is one listed connection.
type Conn struct {
	CID  uint64 `json:"cid"`
	Name string `json:"name"` // the name the client gave
	// User is the authorized user: for a connection an auth callout admitted, the name of
	// the user JWT it minted; for one that presented a user JWT, the user's public key.
	User string `json:"authorized_user"`
}

// Page is one server's answer: its id and the connections it listed.
type Page struct {
	Server string
	Conns  []Conn
}

// Decode reads one server's answer. An error answer, or one without data, is an error
// naming the server.
func Decode(data []byte) (*Page, error) {
	var resp struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
		Data *struct {
			ID    string `json:"server_id"`
			Conns []Conn `json:"connections"`
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
	p := &Page{Server: resp.Data.ID, Conns: resp.Data.Conns}
	if p.Server == "" {
		p.Server = resp.Server.ID
	}
	return p, nil
}
